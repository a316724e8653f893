// The process-rank exchange, over the bootstrap (built when the bootstrap is).
#include "common/bootstrap/bootstrap.h"
#include "transport/exchange.h"

namespace zcx::test {
namespace {

class BootstrapExchange : public Exchange {
 public:
  explicit BootstrapExchange(std::unique_ptr<Bootstrap> bs) : bs_(std::move(bs)) {}
  int rank() const override { return bs_->rank(); }
  int nranks() const override { return bs_->nranks(); }
  uint64_t secret() const override { return bs_->secret(); }
  zcx_status_t allgather(void* data, size_t bytes) override {
    return to_c(bs_->allgather(data, bytes));
  }
  zcx_status_t barrier() override { return to_c(bs_->barrier()); }

 private:
  std::unique_ptr<Bootstrap> bs_;
};

}  // namespace

std::unique_ptr<Exchange> bootstrap_exchange(std::string* why) {
  std::unique_ptr<Bootstrap> bs;
  Status s = Bootstrap::init_from_env(&bs);
  if (s != Status::kSuccess) {
    *why = std::string("Bootstrap::init_from_env failed: ") + last_error();
    return nullptr;
  }
  return std::make_unique<BootstrapExchange>(std::move(bs));
}

}  // namespace zcx::test
