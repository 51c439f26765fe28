/* remote.c — the commands' --connect / --token-file options (remote.h). */
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "spyglass/net.h"

int remote_resolve(const char *cmd, tool_remote *r) {
  if (!r->connect) {
    const char *e = getenv("SPYGLASS_CONNECT");
    if (e && *e)
      r->connect = e;
  }
  r->token[0] = 0;
  if (r->token_file) {
    FILE *f = fopen(r->token_file, "r");
    if (!f) {
      fprintf(stderr, "spyglass %s: cannot read --token-file %s: %s\n", cmd,
              r->token_file, strerror(errno));
      return -1;
    }
    size_t n = fread(r->token, 1, sizeof r->token - 1, f);
    fclose(f);
    r->token[n] = 0;
    r->token[strcspn(r->token, "\r\n")] = 0;
  } else if (getenv("SPYGLASS_TOKEN")) {
    snprintf(r->token, sizeof r->token, "%s", getenv("SPYGLASS_TOKEN"));
  }
  if (strlen(r->token) > SPY_LINK_TOKEN_MAX) {
    fprintf(stderr, "spyglass %s: the token is longer than %u bytes\n", cmd,
            SPY_LINK_TOKEN_MAX);
    return -1;
  }
  if (r->connect)
    spy_net_register(); /* consumers find the link backend */
  return 0;
}

const char *remote_token(const tool_remote *r) {
  return r->token[0] ? r->token : NULL;
}

int remote_fail(const char *cmd, const tool_remote *r, int err) {
  int tls = strncmp(r->connect, "tls://", 6) == 0;
  const char *why = "";
  if (err == SPY_EACCES && tls)
    why = " (the server's certificate is not trusted: $SPYGLASS_CA names "
          "the CA file; or the token is wrong)";
  else if (err == SPY_EACCES)
    why = " (wrong or missing token: --token-file or $SPYGLASS_TOKEN)";
  else if (err == SPY_EBUSY)
    why = " (the server has its maximum of clients)";
  else if (err == SPY_EBADHEADER)
    why = " (not a spyglass server?)";
  fprintf(stderr, "spyglass %s: cannot connect to %s: %s%s\n", cmd, r->connect,
          spy_strerror(err), why);
  return err == SPY_EINVAL ? EXIT_USAGE : EXIT_FAIL;
}
