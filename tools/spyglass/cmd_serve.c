/* cmd_serve.c — `spyglass serve`: the bridge that carries this host's bus
 * to other machines and browsers (spyglass/net.h), in the foreground until
 * SIGINT / SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "spyglass/net.h"
#include "web.h"

#define MAX_ALLOW 32

static void help(FILE *f) {
  fprintf(
      f,
      "usage: spyglass serve [--listen ADDR:PORT] [--token-file F]\n"
      "                      [--allow-origin ORIGIN]... [--allow-host "
      "HOST]...\n"
      "                      [--tls-cert F --tls-key F] [--max-clients N]\n"
      "                      [--dir DIR]\n\n"
      "Relays this host's bus to remote consumers (`spyglass top --connect\n"
      "HOST:PORT`) over TCP, and to browsers over WebSocket at /link, on one\n"
      "port; `/` is the browser dashboard, `/healthz` answers JSON (clients,\n"
      "drops).\n\n"
      "  --listen ADDR:PORT  default 127.0.0.1 and [::1] port 7420; port 0\n"
      "                 picks a free one (printed). Any address other than\n"
      "                 loopback needs --token-file.\n"
      "  --token-file F the token clients must give (16..128 characters,\n"
      "                 first line of F). Without it one is generated and\n"
      "                 printed. Needed by clients not on loopback and by\n"
      "                 pages from a foreign --allow-origin.\n"
      "  --allow-origin ORIGIN  a WebSocket Origin besides this server's own\n"
      "                 (e.g. https://dash.example:8443); repeatable\n"
      "  --allow-host HOST  a Host name besides loopback names, IP literals\n"
      "                 and the listen address; repeatable\n"
      "  --tls-cert F, --tls-key F  PEM certificate and key: TLS on every\n"
      "                 connection (https / wss)\n"
      "  --max-clients N  connections at once (default 64, at most 4096)\n"
      "  --dir DIR      runtime directory of the local bus\n\n"
      "exit codes: 0 stopped by a signal, 1 cannot listen (port busy,\n"
      "            TLS files), 2 bad usage\n");
}

static spy_server *running;
static void on_signal(int sig) {
  (void)sig;
  if (running)
    spy_server_stop(running);
}

static int read_token(const char *file, char *buf, size_t cap) {
  FILE *f = fopen(file, "r");
  if (!f) {
    fprintf(stderr, "spyglass serve: cannot read --token-file %s: %s\n", file,
            strerror(errno));
    return -1;
  }
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  buf[strcspn(buf, "\r\n")] = 0;
  return 0;
}

int cmd_serve(int argc, char **argv) {
  spy_server_desc d = {0};
  const char *origins[MAX_ALLOW], *hosts[MAX_ALLOW];
  cli_strs origin_list = {origins, 0}, host_list = {hosts, 0};
  const char *token_file = NULL;
  int max_clients = 0;
  const cli_opt opts[] = {
      {"--listen", CLI_STR, &d.listen, 0, 0, 0, "ADDR:PORT"},
      {"--token-file", CLI_STR, &token_file, 0, 0, 0, "a file"},
      {"--allow-origin", CLI_STRS, &origin_list, 0, MAX_ALLOW, 0,
       "an origin (scheme://host[:port])"},
      {"--allow-host", CLI_STRS, &host_list, 0, MAX_ALLOW, 0, "a host name"},
      {"--tls-cert", CLI_STR, &d.tls_cert, 0, 0, 0, "a PEM file"},
      {"--tls-key", CLI_STR, &d.tls_key, 0, 0, 0, "a PEM file"},
      {"--dir", CLI_STR, &d.dir, 0, 0, 0, "a directory"},
      {"--max-clients", CLI_INT, &max_clients, 1, 4096, 0,
       "a number of clients"},
  };
  int prc = cli_parse("serve", argc, argv, opts, sizeof opts / sizeof opts[0],
                      NULL, 0, NULL, help);
  if (prc)
    return prc == 1 ? EXIT_OK : EXIT_USAGE;
  d.max_clients = (uint32_t)max_clients;
  d.n_allow_origins = origin_list.n;
  d.n_allow_hosts = host_list.n;
  if (!d.tls_cert != !d.tls_key) {
    fprintf(stderr, "spyglass serve: --tls-cert and --tls-key go together\n");
    return EXIT_USAGE;
  }
  char token[SPY_LINK_TOKEN_MAX + 2];
  if (token_file) {
    if (read_token(token_file, token, sizeof token) < 0)
      return EXIT_USAGE;
    d.token = token;
  }
  d.allow_origins = origins;
  d.allow_hosts = hosts;
  tool_web_install();
  spy_server *s;
  int rc = spy_server_create(&s, &d);
  if (rc < 0) {
    fprintf(stderr, "spyglass serve: not started: %s\n", spy_strerror(rc));
    return rc == SPY_EINVAL && !d.tls_cert ? EXIT_USAGE : EXIT_FAIL;
  }
  if (d.listen)
    printf("spyglass serve: listening on %s (port %d)%s\n", d.listen,
           spy_server_port(s), d.tls_cert ? " with TLS" : "");
  else
    printf("spyglass serve: listening on 127.0.0.1 and [::1] (port %d)%s\n",
           spy_server_port(s), d.tls_cert ? " with TLS" : "");
  if (spy_server_token_generated(s))
    printf("spyglass serve: token %s (generated; pass it with --token-file "
           "or $SPYGLASS_TOKEN)\n",
           spy_server_token(s));
  /* The dashboard: off loopback the page needs the token (it passes it
   * on to the WebSocket), so the URL carries it. */
  const char *lh = d.listen ? d.listen : "127.0.0.1:7420";
  int loop = !d.listen || strncmp(lh, "127.", 4) == 0 ||
             strncmp(lh, "[::1]", 5) == 0 || strncmp(lh, "localhost:", 10) == 0;
  char host[300];
  snprintf(host, sizeof host, "%.*s", (int)strcspn(lh, "]") + (lh[0] == '['),
           lh);
  if (lh[0] != '[')
    host[strcspn(host, ":")] = 0;
  if (!strcmp(host, "0.0.0.0") || !strcmp(host, "[::]"))
    snprintf(host, sizeof host, "127.0.0.1");
  printf("spyglass serve: dashboard %s://%s:%d/%s%s\n",
         d.tls_cert ? "https" : "http", host, spy_server_port(s),
         loop ? "" : "?token=", loop ? "" : spy_server_token(s));
  fflush(stdout);
  running = s;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  rc = spy_server_run(s, -1);
  running = NULL;
  spy_server_destroy(s);
  if (rc < 0) {
    fprintf(stderr, "spyglass serve: %s\n", spy_strerror(rc));
    return EXIT_FAIL;
  }
  return EXIT_OK;
}
