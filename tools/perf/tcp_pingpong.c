/* tcp_pingpong: the loopback floor for compare.sh. Two processes ping-pong a message over
 * TCP with no library in between (TCP_NODELAY, busy-polling non-blocking recv), over one
 * socket for both directions ("duplex") or one socket per direction ("oneway"), and print
 * the one-way latency (round trip / 2) of each repetition in microseconds. "stream" sends
 * iters messages one way over one socket, each answered by one byte only at the end of the
 * repetition, and prints GB/s (1e9 B/s) per repetition. With `piece`, each send() hands the
 * kernel at most that many bytes (zcx sends 160K pieces to a peer on this host, which
 * measured faster than whole sends; see transport/tcp/tcp_config.cc).
 *
 * usage: tcp_pingpong duplex|oneway|stream [iters=20000] [reps=5] [bytes=8] [piece=0: whole] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(const char* what) {
  fprintf(stderr, "tcp_pingpong: %s: %s\n", what, strerror(errno));
  exit(2);
}

static int listen_any(int* port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (s < 0 || bind(s, (struct sockaddr*)&a, sizeof a) != 0 || listen(s, 4) != 0 ||
      getsockname(s, (struct sockaddr*)&a, &len) != 0)
    die("listen");
  *port = ntohs(a.sin_port);
  return s;
}

static int nodelay(int s) {
  int one = 1;
  if (s < 0 || setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("socket");
  return s;
}

static int dial(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (s < 0 || connect(s, (struct sockaddr*)&a, sizeof a) != 0) die("connect");
  return nodelay(s);
}

static void read_all(int s, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(s, buf + got, n - got, MSG_DONTWAIT);
    if (r > 0) got += (size_t)r;
    else if (r == 0 || (errno != EAGAIN && errno != EINTR)) exit(3);  /* peer gone */
  }
}

static size_t piece; /* most bytes per send(); 0: no bound */

static void write_all(int s, const char* buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    size_t len = piece > 0 && n - put > piece ? piece : n - put;
    ssize_t w = send(s, buf + put, len, MSG_DONTWAIT);  /* busy-polls, as zcx does */
    if (w > 0) put += (size_t)w;
    else if (w == 0 || (errno != EAGAIN && errno != EINTR)) die("send");
  }
}

/* One repetition of the stream test from the sending side; returns GB/s. */
static double stream_rep(int s, char* buf, size_t bytes, int iters) {
  double t0 = now_us();
  for (int i = 0; i < iters; ++i) write_all(s, buf, bytes);
  read_all(s, buf, 1);
  return (double)bytes * iters / (now_us() - t0) / 1e3;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int duplex = strcmp(mode, "duplex") == 0, stream = strcmp(mode, "stream") == 0;
  if (!duplex && !stream && strcmp(mode, "oneway") != 0) {
    fprintf(stderr, "usage: tcp_pingpong duplex|oneway|stream [iters] [reps] [bytes] [piece]\n");
    return 2;
  }
  duplex = duplex || stream;
  int iters = argc > 2 ? atoi(argv[2]) : 20000, reps = argc > 3 ? atoi(argv[3]) : 5;
  size_t bytes = argc > 4 ? (size_t)atol(argv[4]) : 8;
  piece = argc > 5 ? (size_t)atol(argv[5]) : 0;
  if (iters < 1 || reps < 1 || bytes < 1 || bytes > ((size_t)1 << 30)) return 2;
  /* Written, not calloc'ed: a large calloc maps the kernel's zero page, so a sender that
   * never writes its buffer copies the same 4 KiB from cache (64 MiB stream: 7.4 GB/s
   * against 5.4 with its pages written, 2026-12-06). Written pages also fault in now. */
  char* buf = malloc(bytes);
  if (buf == NULL) die("malloc");
  memset(buf, 1, bytes);
  int port_a, port_b;
  int listen_a = listen_any(&port_a), listen_b = listen_any(&port_b);
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) { /* the echo side */
    int in = nodelay(accept(listen_a, NULL, NULL));
    int out = duplex ? in : dial(port_b);
    for (int r = 0; stream && r < reps; ++r) {
      for (int i = 0; i < iters; ++i) read_all(in, buf, bytes);
      write_all(in, buf, 1);
    }
    for (long i = 0; !stream && i < (long)iters * reps; ++i) {
      read_all(in, buf, bytes);
      write_all(out, buf, bytes);
    }
    return 0;
  }
  int out = dial(port_a);
  int in = duplex ? out : nodelay(accept(listen_b, NULL, NULL));
  for (int r = 0; stream && r < reps; ++r) printf("%.3f\n", stream_rep(out, buf, bytes, iters));
  for (int r = 0; !stream && r < reps; ++r) {
    double t0 = now_us();
    for (int i = 0; i < iters; ++i) {
      write_all(out, buf, bytes);
      read_all(in, buf, bytes);
    }
    printf("%.2f\n", (now_us() - t0) / iters / 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
