/* util.c — small helpers of the net layer (net_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/net_internal.h"
#include "spyglass/error.h"

uint64_t spy__net_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t spy__net_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

int spy__net_split(const char *addr, char *host, size_t hcap, char *port,
                   size_t pcap) {
  if (!addr || !*addr)
    return SPY_EINVAL;
  const char *colon, *h = addr;
  size_t hl;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':')
      return SPY_EINVAL;
    h = addr + 1;
    hl = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon || strchr(addr, ':') != colon)
      return SPY_EINVAL; /* a bare v6 address needs brackets */
    hl = (size_t)(colon - addr);
  }
  const char *p = colon + 1;
  size_t pl = strlen(p);
  if (hl == 0 || hl >= hcap || pl == 0 || pl > 5 || pl >= pcap)
    return SPY_EINVAL;
  long v = 0;
  for (size_t i = 0; i < pl; i++) {
    if (p[i] < '0' || p[i] > '9')
      return SPY_EINVAL;
    v = v * 10 + (p[i] - '0');
  }
  if (v > 65535)
    return SPY_EINVAL;
  memcpy(host, h, hl);
  host[hl] = 0;
  memcpy(port, p, pl + 1);
  return 0;
}

int spy__net_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -errno;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return 0;
}
