/* listen.c — a provider's in-process server (spy_provider_desc.listen).
 * The core cannot link the net layer; spyglass_net installs a hook
 * (spy_net_register) and the provider starts the same bridge as
 * `spyglass serve` through it, on the server's own thread. */
#include <stdatomic.h>

#include "provider/provider_internal.h"

static _Atomic(const spy_listen_hook *) hook;

void spy_provider_set_listen_hook(const spy_listen_hook *h) {
  atomic_store(&hook, h);
}

int spy__listen_start(spy_provider *p) {
  const spy_listen_hook *h = atomic_load(&hook);
  if (!h || !h->start)
    return SPY_ENOTSUP; /* the app does not link spyglass_net */
  return h->start(&p->server, p->desc.listen, p->desc.listen_token, p->id,
                  p->desc.dir);
}

void spy__listen_stop(spy_provider *p) {
  const spy_listen_hook *h = atomic_load(&hook);
  if (p->server && h)
    h->stop(p->server);
  p->server = NULL;
}

int spy_provider_listen_port(const spy_provider *p) {
  const spy_listen_hook *h = atomic_load(&hook);
  return p->server && h ? h->port(p->server) : 0;
}
