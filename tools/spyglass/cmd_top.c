/* cmd_top.c — `spyglass top [ID|NAME]`: the stats overlay of one provider.
 *
 * Three ways to run: full screen with ncurses on a terminal; one summary
 * line (or JSON object) per interval when stdout is not a terminal; and
 * `--once`, one snapshot after the first data, for scripts and tests.
 * Between refreshes the consumer's poll is the sleep: the process wakes
 * for the provider's frames and the refresh, nothing else.
 *
 * A provider that exits sends `gone`; one that is killed is noticed here
 * by its pid (this host's providers only) once it has been silent for a
 * second, sooner than the protocol's liveness timeout. Either way the
 * screen says so and a fresh consumer searches again, so the provider
 * that comes back (or any other, unless one was named) is picked up. */
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "discover.h"
#include "json.h"
#include "opts.h"
#include "overlay.h"
#include "remote.h"
#include "spyglass/net.h"
#include "state_json.h"
#include "top_build.h"
#include "top_view.h"

#define DEAD_SILENCE_MS 1000 /* a dead pid and this long without a frame */

static void help(FILE *f) {
  fprintf(
      f,
      "usage: spyglass top [ID|NAME] [--interval MS] [--once] [--json]\n"
      "                    [--wait MS] [--ascii] [--dir DIR]\n"
      "                    [--connect HOST:PORT [--token-file F]]\n\n"
      "Shows a provider's stats overlay full screen: FPS, CPU and GPU time\n"
      "in green / yellow / red (FPS from 55 / from 30 / below; ms under 8 /\n"
      "under 16 / above), a sparkline of the last 60 CPU times against the\n"
      "16.7 ms line, the counters, memory, resolution, PAUSED / idle, the\n"
      "named values, bus health and the adapter. Without ID or NAME the\n"
      "first provider found (a user one before a system one); with none\n"
      "running it waits for one. A provider that exits or is killed is\n"
      "shown as gone until it (or, without ID/NAME, another) comes back.\n\n"
      "  ID|NAME        a provider id (16 hex digits, see `spyglass ls`) or\n"
      "                 program name\n"
      "  --interval MS  refresh period (default 100 on a terminal, else\n"
      "                 1000)\n"
      "  --once         print one snapshot after the first data (and one\n"
      "                 interval more, default 200 ms), then exit\n"
      "  --json         snapshots as JSON objects (one per line)\n"
      "  --wait MS      how long ID/NAME may take to answer before it is\n"
      "                 unknown, and how long --once waits for data\n"
      "                 (default 2000)\n"
      "  --ascii        no Unicode characters in the sparkline\n"
      "  --dir DIR      runtime directory (default $SPYGLASS_DIR, else\n"
      "                 $XDG_RUNTIME_DIR/spyglass, else a per-user one)\n"
      "  --connect HOST:PORT  a provider of another host, through its\n"
      "                 `spyglass serve` (default $SPYGLASS_CONNECT);\n"
      "                 tls://HOST:PORT for a server with TLS (CA file:\n"
      "                 $SPYGLASS_CA, else the system's)\n"
      "  --token-file F the server's token (default $SPYGLASS_TOKEN)\n\n"
      "keys: q quit, p pick another provider, z zones view (subscribes to\n"
      "      CPU zones while open), up/down/PgUp/PgDn/Home/End\n"
      "      scroll the named values\n"
      "A provider that publishes a traced build (demo build, or a tool\n"
      "calling spy_trace_publish) shows its live build view in place of the\n"
      "values: modules done, hook calls and time per plugin, slowest hooks.\n"
      "Without a terminal (and without --once) one line per interval is\n"
      "printed instead of the screen.\n\n"
      "exit codes: 0 quit (or --once printed its snapshot), 1 runtime\n"
      "            failure (bus, or --once got no data within --wait),\n"
      "            2 bad usage or no provider with that ID or NAME\n");
}

typedef struct top_opts {
  const char *want, *dir;
  int interval, once, json, wait, ascii;
  tool_remote rem;
} top_opts;

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

/* The consumer and what the user should be told about it. */
typedef struct session {
  spy_consumer *c;
  const char *dir;
  char want[SPY_NAME_MAX + 1]; /* "" = any provider */
  char last_name[64];          /* the provider last connected, if any */
  uint32_t last_pid;
  int had_provider;
  char status[256];
  int zones; /* the zones view is open: subscribe to SPY_FEAT_ZONES too */
  const tool_remote *rem; /* --connect: through a bridge */
} session;

static int session_open(session *s) {
  spy_consumer_desc d = {.want = s->want[0] ? s->want : NULL, .dir = s->dir};
  /* BUFFERS: the buffer list (metadata only: top asks for no pixels) */
  d.features = SPY_FEAT_STATS | SPY_FEAT_ENV | SPY_FEAT_REGISTRY |
               SPY_FEAT_HEALTH | SPY_FEAT_BUFFERS | SPY_FEAT_BATCHES |
               SPY_FEAT_PASSES | SPY_FEAT_TRACE; /* TRACE: build progress */
  if (s->zones) /* zones cost the provider only while someone looks */
    d.features |= SPY_FEAT_ZONES;
  if (s->rem && s->rem->connect) {
    d.connect = s->rem->connect;
    d.token = remote_token(s->rem);
    d.remote = spy_net_channel_ops();
  }
  return spy_consumer_create(&s->c, &d);
}

static void session_close(session *s) {
  spy_consumer_destroy(s->c);
  s->c = NULL;
}

/* Switches to another provider (the picker) or back to searching. */
static int session_retarget(session *s, const char *want) {
  session_close(s);
  snprintf(s->want, sizeof s->want, "%s", want ? want : "");
  s->had_provider = 0;
  return session_open(s);
}

static int pid_gone(uint32_t pid) {
  return pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* After a poll: notices a killed provider and sets the status text.
 * Returns < 0 only if a fresh consumer cannot be created. */
static int session_check(session *s) {
  const spy_state *st = spy_consumer_state(s->c);
  if (st->conn == SPY_CONN_CONNECTED || st->conn == SPY_CONN_SUBSCRIBING) {
    snprintf(s->last_name, sizeof s->last_name, "%.63s", st->provider_name);
    overlay_sanitize(s->last_name, 0);
    s->last_pid = st->provider.pid;
    int remote = s->rem && s->rem->connect; /* its pid is not ours */
    if (!remote && pid_gone(st->provider.pid) &&
        tool_mono_ms() - st->last_msg_ms > DEAD_SILENCE_MS) {
      session_close(s);
      int rc = session_open(s);
      if (rc < 0)
        return rc;
      st = spy_consumer_state(s->c);
    } else if (st->conn == SPY_CONN_CONNECTED) {
      s->had_provider = 1;
      s->status[0] = 0;
      return 0;
    }
  }
  if (st->conn == SPY_CONN_SUBSCRIBING)
    snprintf(s->status, sizeof s->status, "connecting to %.63s (pid %u)...",
             s->last_name, s->last_pid);
  else if (s->had_provider)
    snprintf(s->status, sizeof s->status,
             "provider %.63s (pid %u) is gone (exited, killed or silent); "
             "waiting for %s to come back",
             s->last_name, s->last_pid, s->want[0] ? "it" : "a provider");
  else if (s->want[0])
    snprintf(s->status, sizeof s->status, "waiting for provider %.200s...",
             s->want);
  else
    snprintf(s->status, sizeof s->status, "waiting for a provider...");
  return 0;
}

/* Runs the consumer for `ms` (its poll is the sleep). */
static void poll_for(session *s, int ms) {
  uint64_t end = tool_mono_ms() + (uint64_t)ms;
  for (uint64_t now = tool_mono_ms(); now < end && !stop; now = tool_mono_ms())
    spy_consumer_poll(s->c, (int)(end - now));
}

static int ready(const spy_state *st) {
  return st->conn == SPY_CONN_CONNECTED &&
         ((st->samples > 0 && st->snapshots > 0) ||
          top_build_seen(st)); /* a build tool sends no frame samples */
}

static void print_snapshot(const session *s, int as_json) {
  const spy_state *st = spy_consumer_state(s->c);
  if (as_json) {
    json_out j;
    jw_init(&j, stdout);
    state_to_json(&j, s->c);
    jw_newline(&j);
  } else if (st->conn == SPY_CONN_CONNECTED) {
    char line[1024];
    if (top_build_seen(st) && !st->samples)
      top_build_line(st, line, sizeof line);
    else
      overlay_summary_line(st, line, sizeof line);
    puts(line);
  } else {
    puts(s->status);
  }
  fflush(stdout);
}

static int run_once(session *s, const top_opts *o) {
  uint64_t end = tool_mono_ms() + (uint64_t)o->wait;
  const spy_state *st = spy_consumer_state(s->c);
  while (!ready(st) && tool_mono_ms() < end && !stop) {
    spy_consumer_poll(s->c, 50);
    st = spy_consumer_state(s->c);
  }
  if (!ready(st)) {
    if (st->conn == SPY_CONN_SEARCHING || st->conn == SPY_CONN_LOST)
      fprintf(stderr, "spyglass top: no provider answered within %d ms\n",
              o->wait);
    else
      fprintf(stderr, "spyglass top: no data from %s within %d ms\n",
              st->provider_name, o->wait);
    return EXIT_FAIL;
  }
  poll_for(s, o->interval); /* one refresh period more: a few batches */
  if (session_check(s) < 0) {
    fprintf(stderr, "spyglass top: cannot start a consumer\n");
    return EXIT_FAIL;
  }
  print_snapshot(s, o->json);
  return EXIT_OK;
}

/* No terminal: one line (or JSON object) per interval; state changes are
 * printed when they happen. */
static int run_lines(session *s, const top_opts *o) {
  char said[256] = "";
  while (!stop) {
    poll_for(s, o->interval);
    if (session_check(s) < 0)
      return EXIT_FAIL;
    const spy_state *st = spy_consumer_state(s->c);
    if (st->conn != SPY_CONN_CONNECTED && !o->json) {
      if (strcmp(said, s->status) != 0) {
        puts(s->status);
        fflush(stdout);
        snprintf(said, sizeof said, "%s", s->status);
      }
      continue;
    }
    said[0] = 0;
    print_snapshot(s, o->json);
    if (ferror(stdout))
      return EXIT_FAIL;
  }
  return EXIT_OK;
}

static void pick(top_view *v, session *s) {
  v->n_list = discover(s->dir, 300, NULL, v->list, DISCOVER_MAX);
  if (v->n_list < 0)
    v->n_list = 0;
  v->sel = 0;
  const spy_state *st = spy_consumer_state(s->c);
  for (int i = 0; i < v->n_list; i++)
    if (v->list[i].info.id == st->provider.id)
      v->sel = i;
}

/* Handles one key; returns 1 to quit. */
static int on_key(int ch, top_view *v, session *s, int *picking) {
  if (*picking) {
    switch (ch) {
    case KEY_UP: v->sel = v->sel > 0 ? v->sel - 1 : 0; break;
    case KEY_DOWN: v->sel = v->sel + 1 < v->n_list ? v->sel + 1 : v->sel; break;
    case '\n':
    case '\r':
    case KEY_ENTER:
      if (v->n_list) {
        char id[17];
        snprintf(id, sizeof id, "%016llx",
                 (unsigned long long)v->list[v->sel].info.id);
        if (session_retarget(s, id) < 0)
          return 1;
        v->scroll = 0;
      }
      *picking = 0;
      break;
    case 27:
    case 'q':
    case 'p': *picking = 0; break;
    default: break;
    }
    return 0;
  }
  int page = v->value_rows > 1 ? v->value_rows - 1 : 1;
  switch (ch) {
  case 'q':
  case 'Q': return 1;
  case 'p':
  case 'P':
    pick(v, s);
    *picking = 1;
    break;
  case 'z':
  case 'Z': { /* the zones view: subscribe again with (or without) zones */
    const spy_state *st = spy_consumer_state(s->c);
    char want[SPY_NAME_MAX + 1];
    if (st->conn == SPY_CONN_CONNECTED)
      snprintf(want, sizeof want, "%016llx",
               (unsigned long long)st->provider.id);
    else
      snprintf(want, sizeof want, "%s", s->want);
    v->zones = s->zones = !s->zones;
    if (session_retarget(s, want) < 0)
      return 1;
    break;
  }
  case KEY_UP: v->scroll--; break;
  case KEY_DOWN: v->scroll++; break;
  case KEY_PPAGE: v->scroll -= page; break;
  case KEY_NPAGE: v->scroll += page; break;
  case KEY_HOME: v->scroll = 0; break;
  case KEY_END: v->scroll = 1 << 30; break; /* clamped when drawn */
  default: break; /* KEY_RESIZE and the rest: the redraw below */
  }
  return 0;
}

static int run_screen(session *s, const top_opts *o, SCREEN *scr) {
  (void)scr;
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  top_view v;
  memset(&v, 0, sizeof v);
  v.ascii = o->ascii;
  top_view_init(&v);
  int picking = 0, rc = EXIT_OK;
  while (!stop) {
    if (session_check(s) < 0) {
      rc = EXIT_FAIL;
      break;
    }
    memcpy(v.status, s->status, sizeof v.status);
    if (picking)
      top_view_draw_picker(&v);
    else
      top_view_draw(&v, s->c);
    refresh();
    /* Sleep in the consumer until the next refresh, looking at the
     * keyboard at least every 100 ms. */
    uint64_t end = tool_mono_ms() + (uint64_t)o->interval;
    int quit = 0, redraw = 0;
    for (uint64_t now = tool_mono_ms(); now < end && !stop && !quit && !redraw;
         now = tool_mono_ms()) {
      uint64_t slice = end - now > 100 ? 100 : end - now;
      spy_consumer_poll(s->c, (int)slice);
      for (int ch; !quit && (ch = getch()) != ERR;) {
        quit |= on_key(ch, &v, s, &picking);
        redraw = 1; /* a key (or a resize) shows at once */
      }
    }
    if (quit)
      break;
  }
  endwin();
  return rc;
}

static int parse(int argc, char **argv, top_opts *o) {
  o->interval = -1;
  const cli_opt opts[] = {
      {"--once", CLI_FLAG, &o->once, 0, 0, 0, NULL},
      {"--json", CLI_FLAG, &o->json, 0, 0, 0, NULL},
      {"--ascii", CLI_FLAG, &o->ascii, 0, 0, 0, NULL},
      {"--interval", CLI_INT, &o->interval, 10, 3600000, 0,
       "a number of milliseconds"},
      {"--wait", CLI_INT, &o->wait, 0, 600000, 0, "a number of milliseconds"},
      {"--dir", CLI_STR, &o->dir, 0, 0, 0, "a directory"},
      {"--connect", CLI_STR, &o->rem.connect, 0, 0, 0, "HOST:PORT"},
      {"--token-file", CLI_STR, &o->rem.token_file, 0, 0, 0, "a file"},
  };
  int npos = 0;
  int rc = cli_parse("top", argc, argv, opts, sizeof opts / sizeof opts[0],
                     &o->want, 1, &npos, help);
  if (rc)
    return rc == 1 ? 1 : -1;
  if (o->want && strlen(o->want) > SPY_NAME_MAX) {
    fprintf(stderr, "spyglass top: provider name too long\n");
    return -1;
  }
  int interval_set = o->interval >= 0;
  if (!interval_set)
    o->interval = isatty(STDOUT_FILENO) && !o->once ? 100 : 1000;
  if (o->once && !interval_set)
    o->interval = 200;
  return 0;
}

int cmd_top(int argc, char **argv) {
  top_opts o = {.wait = 2000};
  int p = parse(argc, argv, &o);
  if (p > 0)
    return EXIT_OK;
  if (p < 0) {
    fprintf(stderr, "'spyglass top --help' for usage\n");
    return EXIT_USAGE;
  }
  if (remote_resolve("top", &o.rem) < 0)
    return EXIT_USAGE;
  if (o.want) {
    void *link = NULL;
    const spy_channel_ops *ops = spy_net_channel_ops();
    if (o.rem.connect) {
      int lrc = ops->link_open(&link, o.rem.connect, remote_token(&o.rem));
      if (lrc < 0)
        return remote_fail("top", &o.rem, lrc);
      discover_via(ops, link);
    }
    found_provider ps[DISCOVER_MAX];
    int n = discover(o.dir, o.wait, o.want, ps, DISCOVER_MAX);
    if (link) {
      discover_via(NULL, NULL);
      ops->link_close(link);
    }
    if (n < 0) {
      fprintf(stderr, "spyglass top: cannot open the bus: %s\n",
              spy_strerror(n));
      return EXIT_FAIL;
    }
    int hit = 0;
    for (int i = 0; i < n; i++)
      hit |= found_matches(&ps[i], o.want);
    if (!hit) {
      fprintf(stderr,
              "spyglass top: no provider '%s' on this host (none answered "
              "within %d ms; 'spyglass ls' lists them)\n",
              o.want, o.wait);
      return EXIT_USAGE;
    }
  }
  session s;
  memset(&s, 0, sizeof s);
  s.dir = o.dir;
  s.rem = &o.rem;
  snprintf(s.want, sizeof s.want, "%s", o.want ? o.want : "");
  int rc = session_open(&s);
  if (rc < 0 && o.rem.connect)
    return remote_fail("top", &o.rem, rc);
  if (rc < 0) {
    fprintf(stderr, "spyglass top: cannot start a consumer: %s\n",
            spy_strerror(rc));
    return EXIT_FAIL;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  if (o.once) {
    rc = run_once(&s, &o);
  } else if (!o.json && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO)) {
    setlocale(LC_ALL, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
      o.ascii = 1;
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (scr) {
      rc = run_screen(&s, &o, scr);
      delscreen(scr);
    } else {
      fprintf(stderr,
              "spyglass top: cannot drive this terminal (TERM=%s); "
              "printing lines\n",
              getenv("TERM") ? getenv("TERM") : "");
      rc = run_lines(&s, &o);
    }
  } else {
    rc = run_lines(&s, &o);
  }
  session_close(&s);
  return rc;
}
