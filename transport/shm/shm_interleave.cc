// Pipelined messages in flight together share the chunk stream round-robin: one chunk of
// each member in turn, in message order, skipping members already complete.
//
// Why: a window of sends that read the same region (a benchmark's one buffer, a
// collective's repeated pieces) then touches each region once per round while it is still
// in cache, instead of streaming every message from memory in turn; and a message posted
// behind a large one is not held up until the large one is done.
//
// Deadlock freedom: a receiver takes the stream in order, so a chunk of a message whose
// receive is not posted would block every chunk behind it. The sender therefore groups only
// messages whose receives are posted (rline->posted, published by irecv); the first member
// needs none, as before, since nothing is queued behind it. The group's slots are published
// last member first, so a receiver that sees the first sees them all.
//
// Both sides derive the chunk order from the member sizes alone; the slots carry each
// member's size and the last member's seq (aux), which the receiver bounds-checks against
// the receives it posted.
#include "common/clock.h"
#include "common/stream_copy.h"
#include "shm/shm.h"

#include <algorithm>
#include <cstring>

namespace zcx::shm {
namespace {

// The member after `j` that still has bytes to stream (j itself when it is the only one).
int next_member(const Interleave& g, int j) {
  for (int k = 1; k <= g.n; ++k) {
    const int i = (j + k) % g.n;
    if (g.m[i].off < g.m[i].size) return i;
  }
  return j;
}

bool pipelined(Comm* c, Request* r) {
  return r->phase == kSendNew && r->size > c->layout.inline_max() && !use_cma(c, r);
}

// How many queued sends from the front join the group: pipelined, receive posted, a slot
// free for each.
int group_size(Comm* c) {
  const uint64_t posted = c->rline->posted.load(std::memory_order_acquire);
  int n = 1;
  while (n < kMaxGroup && static_cast<size_t>(n) < c->reqs.queued() &&
         pipelined(c, c->reqs.at(static_cast<size_t>(n))) && c->head + n + 1 <= posted &&
         slot_free(c, static_cast<uint64_t>(n) + 1))
    ++n;
  return n;
}

// In-order completion: members finish as a prefix, so requests complete in posting order
// (a completed request may be released by test() at once, so it must be off the queue).
template <class Finish>
void complete_prefix(Interleave& g, Finish&& finish) {
  while (g.finished < g.n && g.m[g.finished].off == g.m[g.finished].size)
    finish(g.m[g.finished++]);
}

// Receiver: whether the group copies out with non-temporal stores. They pay off when each
// line is written once and would otherwise only evict the caches: every member writes a
// buffer of its own, at least stream_min bytes in all. Members that share a buffer (a
// window of receives into one buffer) rewrite its lines one round of chunks apart, while
// they are still in cache; non-temporal stores would send every rewrite to memory (a
// window of 64 messages of 64 MiB into one buffer: 39 GB/s with them, 59-60 without).
bool copy_out_streaming(const Interleave& g, size_t stream_min) {
  size_t total = 0;
  for (int j = 0; j < g.n; ++j) {
    const uint8_t* dst = g.m[j].r->bufs[g.m[j].buf];
    for (int k = 0; k < j; ++k)
      if (g.m[k].r->bufs[g.m[k].buf] == dst) return false;
    total += g.m[j].size;
  }
  return total >= stream_min;
}

// Receiver: matches member j (the slot at tail + j) to the next free buffer, walking the
// posted receives in order from the front (*q, with `taken` marking claimed buffers).
Status match_member(Comm* c, int j, uint64_t last, size_t* q, bool* taken, int* claimed) {
  Request* r = c->reqs.at(*q);
  while (r->nfilled + *claimed == r->n) {
    if (++*q >= c->reqs.queued())
      return corrupt(c, "interleave group (beyond the posted receives)");
    r = c->reqs.at(*q);
    std::fill(taken, taken + kMaxRecvs, false);
    *claimed = 0;
  }
  SlotHeader* s = slot_at(c, c->tail + static_cast<uint64_t>(j));
  if (s->seq.load(std::memory_order_acquire) != c->tail + static_cast<uint64_t>(j) + 1)
    return corrupt(c, "interleave group (member slot not published)");
  const uint64_t size = s->size;
  const int tag = s->tag;
  if (s->type != (c->group.fine ? kSlotPipeFine : kSlotPipe) || s->aux != last)
    return corrupt(c, "interleave group member");
  if (size <= c->layout.inline_max()) return corrupt(c, "pipelined message size");
  int i = -1;
  ZCX_TRY(match_buffer(c, r, tag, size, taken, &i));
  taken[i] = true;
  ++*claimed;
  c->group.m[j] = GroupMember{r, i, static_cast<size_t>(size), 0};
  return Status::kSuccess;
}

size_t group_bytes(Comm* c, int n) {
  size_t bytes = 0;
  for (int j = 0; j < n; ++j) bytes += c->reqs.at(static_cast<size_t>(j))->size;
  return bytes;
}

// A trial of a cut takes the fewest members that stream four rings' worth: a window of 64
// messages of 64 MiB in one group would otherwise run whole in the cut on trial (with the
// vCPUs far, 4 GiB at a third below the other cut's rate).
int trial_members(Comm* c, int n) {
  const size_t want = 4 * c->layout.ring_bytes();
  size_t bytes = 0;
  for (int j = 0; j < n; ++j)
    if ((bytes += c->reqs.at(static_cast<size_t>(j))->size) >= want) return j + 1;
  return n;
}

void set_cut(const Layout& l, bool fine, Interleave* g) {
  g->fine = fine;
  g->nchunks = fine ? l.fine_nchunks : l.nchunks;
  g->chunk_bytes = fine ? l.fine_chunk_bytes : l.chunk_bytes;
}

// Sender: the ring holds chunks of the other cut until the receiver has taken them all.
Status ring_ready_for(Comm* c, const Interleave& g) {
  if (g.fine == c->cuts.ring_fine) return Status::kSuccess;
  c->chunk_tail = c->rline->chunk_tail.load(std::memory_order_acquire);
  if (c->chunk_tail > c->chunk_head) return corrupt(c, "chunk tail");
  if (c->chunk_tail != c->chunk_head) return Status::kInProgress;
  c->cuts.ring_fine = g.fine;
  ++c->cuts.switches;
  return Status::kSuccess;
}

// Sender: a measuring group's rate, from its first chunk to its last, by the chunks the
// receiver took meanwhile.
void measure_cut(Comm* c, Interleave& g, bool ended) {
  if (!g.measuring) return;
  const uint64_t tail = c->rline->chunk_tail.load(std::memory_order_acquire);
  if (!ended) {
    g.start_ns = now_ns();
    g.tail0 = tail;
    return;
  }
  g.measuring = false;
  c->cuts.arm[g.fine ? 1 : 0].trying = false;
  if (g.start_ns != 0 && tail > g.tail0)
    cut_rate(c, g.fine, size_t(tail - g.tail0) * g.chunk_bytes, g.start_ns);
}

}  // namespace

Status group_start(Comm* c) {
  Interleave& g = c->group;
  g = Interleave();
  g.n = group_size(c);
  size_t bytes = group_bytes(c, g.n);
  bool trial = false;
  set_cut(c->layout, choose_fine(c, bytes, &trial), &g);
  if (trial) {
    g.n = trial_members(c, g.n);
    bytes = group_bytes(c, g.n);
  }
  g.measuring = cut_measurable(c, bytes);
  for (int j = g.n - 1; j >= 0; --j) {  // last member first: see the top of the file
    Request* r = c->reqs.at(static_cast<size_t>(j));
    SlotHeader* s = slot_at(c, c->head + static_cast<uint64_t>(j));
    s->size = r->size;
    s->tag = r->tag;
    s->type = g.fine ? kSlotPipeFine : kSlotPipe;
    s->aux = c->head + static_cast<uint64_t>(g.n);
    r->seq = c->head + static_cast<uint64_t>(j) + 1;
    r->phase = kSendGroup;
    g.m[j] = GroupMember{r, 0, r->size, 0};
    s->seq.store(r->seq, std::memory_order_release);
  }
  c->head += static_cast<uint64_t>(g.n);
  c->progressed = true;
  return group_stream(c);
}

Status group_stream(Comm* c) {
  Interleave& g = c->group;
  const size_t chunk = g.chunk_bytes;
  if (g.active()) ZCX_TRY(ring_ready_for(c, g));
  while (g.active()) {
    if (c->chunk_head - c->chunk_tail >= g.nchunks) {
      c->chunk_tail = c->rline->chunk_tail.load(std::memory_order_acquire);
      if (c->chunk_tail > c->chunk_head) return corrupt(c, "chunk tail");
      if (c->chunk_head - c->chunk_tail >= g.nchunks) return Status::kInProgress;
    }
    if (g.measuring && g.start_ns == 0) measure_cut(c, g, false);
    if (c->chunk_budget == 0) return Status::kInProgress;
    --c->chunk_budget;
    GroupMember& m = g.m[g.next];
    const size_t n = std::min(chunk, m.size - m.off);
    const int64_t t0 = adaptive(c, m.r->size) ? now_ns() : 0;
    memcpy(chunk_at(c, c->chunk_head), m.r->data + m.off, n);
    if (t0 != 0) copy_rate(c, false, m.r->size, n, t0);
    m.off += n;
    c->sline->chunk_head.store(++c->chunk_head, std::memory_order_release);
    c->progressed = true;
    g.next = next_member(g, g.next);
    complete_prefix(g, [](GroupMember& done) { done.r->done = true; });
  }
  measure_cut(c, g, true);
  return Status::kSuccess;
}

Status group_begin(Comm* c, uint64_t last, bool fine) {
  const uint64_t first = c->tail + 1;
  if (last < first || last - first >= static_cast<uint64_t>(kMaxGroup) || last > c->posted)
    return corrupt(c, "interleave group bound");
  if (fine && c->layout.fine_nchunks == 0) return corrupt(c, "slot type (no fine cut)");
  Interleave& g = c->group;
  g = Interleave();
  set_cut(c->layout, fine, &g);
  size_t q = 0;
  bool taken[kMaxRecvs] = {};
  int claimed = 0;
  const int n = static_cast<int>(last - first + 1);
  for (int j = 0; j < n; ++j) ZCX_TRY(match_member(c, j, last, &q, taken, &claimed));
  g.n = n;
  g.streaming = copy_out_streaming(g, c->stream_min);
  slot_release(c, static_cast<uint64_t>(n));
  c->progressed = true;
  return Status::kSuccess;
}

Status group_drain(Comm* c) {
  Interleave& g = c->group;
  const size_t chunk = g.chunk_bytes;
  while (g.active()) {
    if (c->chunk_tail == c->chunk_head) {
      c->chunk_head = c->sline->chunk_head.load(std::memory_order_acquire);
      if (c->chunk_head - c->chunk_tail > g.nchunks) return corrupt(c, "chunk head");
      if (c->chunk_tail == c->chunk_head) return Status::kInProgress;
    }
    if (c->chunk_budget == 0) return Status::kInProgress;
    --c->chunk_budget;
    GroupMember& m = g.m[g.next];
    const size_t n = std::min(chunk, m.size - m.off);
    copy_maybe_streaming(m.r->bufs[m.buf] + m.off, chunk_at(c, c->chunk_tail), n, g.streaming);
    m.off += n;
    c->rline->chunk_tail.store(++c->chunk_tail, std::memory_order_release);
    c->progressed = true;
    g.next = next_member(g, g.next);
    complete_prefix(g, [c](GroupMember& done) { recv_finish(c, done.r, done.buf, done.size); });
  }
  return Status::kSuccess;
}

}  // namespace zcx::shm
