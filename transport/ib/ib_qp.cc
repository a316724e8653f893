// Queue pairs and completion queue of one comm: creation, INIT -> RTR -> RTS, receive WRs,
// teardown, and the comm-level error helpers.
#include "ib/ib.h"

#include "common/log.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

namespace zcx::ib {
namespace {

int clamp_wr(const Device* d, int want) { return d->max_qp_wr > 0 ? std::min(want, d->max_qp_wr) : want; }

ibv_qp* create_one(Comm* c, int send_wr, int recv_wr) {
  const IbvApi* api = ibv_shim();
  ibv_qp_init_attr a{};
  a.send_cq = c->cq;
  a.recv_cq = c->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = static_cast<uint32_t>(clamp_wr(c->dev, send_wr));
  a.cap.max_recv_wr = static_cast<uint32_t>(clamp_wr(c->dev, recv_wr));
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = static_cast<uint32_t>(std::min<size_t>(params::inline_bytes.get(), 256));
  ibv_qp* qp = api->create_qp(c->dev->pd, &a);
  if (qp == nullptr && a.cap.max_inline_data != 0) {  // the device may refuse inline data
    a.cap.max_inline_data = 0;
    qp = api->create_qp(c->dev->pd, &a);
  }
  if (qp != nullptr) c->max_inline = static_cast<int>(a.cap.max_inline_data);
  return qp;
}

Status to_init(Comm* c, ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(c->dev->port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_shim()->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                             IBV_QP_ACCESS_FLAGS);
  if (rc != 0)
    return set_error(Status::kSystem, kLog, "ib: QP to INIT on %s failed: %s",
                     c->dev->name.c_str(), errno_text(rc));
  return Status::kSuccess;
}

// `remote`: the peer's Hello, or our own for the flush QP (connected to itself).
Status to_rtr(Comm* c, ibv_qp* qp, const Hello& remote, uint32_t remote_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(c->dev->port_attr.active_mtu, remote.mtu));
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(c->dev->port);
  if (c->dev->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(c->dev->gid_index);
    a.ah_attr.grh.hop_limit = 255;
  } else {
    a.ah_attr.dlid = remote.lid;
  }
  int rc = ibv_shim()->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                             IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0)
    return set_error(Status::kSystem, kLog,
                     "ib: QP to RTR on %s towards %s (GID %s, qpn %u) failed: %s; check "
                     "ZCX_IB_GID_INDEX and that both ends use the same link layer",
                     c->dev->name.c_str(), c->peer_desc.c_str(), gid_string(remote.gid).c_str(),
                     remote_qpn, errno_text(rc));
  return Status::kSuccess;
}

Status to_rts(Comm* c, ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = static_cast<uint8_t>(params::timeout.get());
  a.retry_cnt = static_cast<uint8_t>(params::retry_cnt.get());
  a.rnr_retry = 7;
  a.sq_psn = c->local.psn;
  a.max_rd_atomic = 1;
  int rc = ibv_shim()->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                             IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                             IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0)
    return set_error(Status::kSystem, kLog, "ib: QP to RTS on %s failed: %s",
                     c->dev->name.c_str(), errno_text(rc));
  return Status::kSuccess;
}

}  // namespace

Status qp_create(Comm* c, int nqps) {
  const IbvApi* api = ibv_shim();
  int send_wr = c->is_send ? 2 * kSendReqs + 64 : kSlots + 64;
  int recv_wr = c->is_send ? 1 : kSendReqs + 64;
  int cqe = kSendReqs * nqps + kSlots + 128;
  if (c->dev->max_cqe > 0) cqe = std::min(cqe, c->dev->max_cqe);
  c->cq = api->create_cq(c->dev->ctx, cqe, nullptr, nullptr, 0);
  if (c->cq == nullptr)
    return set_error(Status::kSystem, kLog, "ib: ibv_create_cq(%d) on %s failed: %s", cqe,
                     c->dev->name.c_str(), errno_text(errno));
  c->nqps = nqps;
  for (int i = 0; i < nqps; ++i) {
    ibv_qp* qp = create_one(c, send_wr, recv_wr);
    if (qp == nullptr)
      return set_error(Status::kSystem, kLog,
                       "ib: ibv_create_qp on %s failed: %s (the device allows %d QPs)",
                       c->dev->name.c_str(), errno_text(errno), c->dev->max_qp);
    c->qps.push_back(qp);
    ZCX_TRY(to_init(c, qp));
    c->local.qpn[i] = qp->qp_num;
  }
  return Status::kSuccess;
}

Status qp_connect(Comm* c) {
  for (int i = 0; i < c->nqps; ++i) {
    ZCX_TRY(to_rtr(c, c->qps[i], c->remote, c->remote.qpn[i]));
    ZCX_TRY(to_rts(c, c->qps[i]));
  }
  return Status::kSuccess;
}

// NCCL's GDR flush: a QP connected to itself, on the comm's CQ, through which iflush reads a
// byte of the received buffer back into a host word. A read that follows the NIC's writes
// to GPU memory completes only after they have landed there.
Status flush_qp_create(RecvComm* c) {
  ibv_qp* qp = create_one(c, kSlots, 1);
  if (qp == nullptr)
    return set_error(Status::kSystem, kLog, "ib: ibv_create_qp (flush QP) on %s failed: %s",
                     c->dev->name.c_str(), errno_text(errno));
  c->flush_qp = qp;
  ZCX_TRY(to_init(c, qp));
  ZCX_TRY(to_rtr(c, qp, c->local, qp->qp_num));
  return to_rts(c, qp);
}

Status post_recv_wrs(Comm* c, int qp, int count) {
  for (int i = 0; i < count; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kWrRecv | static_cast<uint64_t>(qp);
    wr.num_sge = 0;  // WRITE WITH IMM carries no payload into the receive queue
    if (int rc = ibv_post_recv(c->qps[qp], &wr, &bad); rc != 0)
      return comm_fail(c, Status::kSystem, "ib: ibv_post_recv on %s failed: %s",
                       c->dev->name.c_str(), errno_text(rc));
  }
  return Status::kSuccess;
}

Status comm_fail(Comm* c, Status s, const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->error.has()) return c->error.raise();
  c->error.record(s, msg);
  return set_error(s, kLog, "%s", msg);
}

bool peer_gone(Comm* c, std::string* why) {
  int64_t now = now_ns();
  if (now < c->next_sock_check_ns) return false;
  c->next_sock_check_ns = now + 10 * 1000 * 1000;
  char b;
  ssize_t n = recv(c->sock.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
    return false;
  *why = n == 0 ? "its side channel closed" : errno_text(errno);
  return true;
}

Comm::~Comm() {
  const IbvApi* api = ibv_shim();
  if (api == nullptr) return;
  for (ibv_qp* qp : qps) api->destroy_qp(qp);
  qps.clear();
  if (cq) api->destroy_cq(cq);
}

}  // namespace zcx::ib
