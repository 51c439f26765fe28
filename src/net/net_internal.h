/* net_internal.h — helpers shared by the net layer's files: clocks,
 * address parsing, sockets. */
#ifndef SPY_NET_INTERNAL_H
#define SPY_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC ns: the clock the bus's clock sync uses, so a bridge on
 * the provider's host answers in the provider's clock. */
uint64_t spy__net_mono_ns(void);
uint64_t spy__net_wall_ms(void);
/* Splits "HOST:PORT" / "[V6]:PORT" into host and port strings. 0 or
 * SPY_EINVAL. */
int spy__net_split(const char *addr, char *host, size_t hcap, char *port,
                   size_t pcap);
/* Sets O_NONBLOCK (and TCP_NODELAY on a TCP socket). */
int spy__net_nonblock(int fd);

#endif
