/* test_demo_cli.c — `spyglass demo` as a user runs it: a real process that
 * renders, reports GPU times from its device thread and watches itself
 * through an in-process consumer; and `spyglass demo --headless` watched
 * from this process over the bus. */
#include <math.h>

#include "spyglass/consumer.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];

TEST(demo_watches_itself_and_prints_live_stats_without_a_terminal) {
  tu_rundir(dir, sizeof dir);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s demo --seconds 3 --dir %s --name selfwatch > %s/out 2>&1",
           SPY_TOOL_PATH, dir, dir);
  CHECK_EQ(system(cmd), 0);
  char path[300], text[8192] = {0};
  snprintf(path, sizeof path, "%s/out", dir);
  FILE *f = fopen(path, "r");
  CHECK(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  /* At least one line with real numbers: fps > 0 and a GPU time. */
  double fps = 0, cpu = -1, gpu = -1;
  const char *line = strstr(text, "fps ");
  CHECK(line);
  CHECK(sscanf(line, "fps %lf cpu %lf ms gpu %lf ms", &fps, &cpu, &gpu) == 3);
  CHECK(fps > 1);
  CHECK(cpu >= 0);
  CHECK(gpu > 0); /* the device thread's times reached the consumer */
  tu_rm_rf(dir);
}

TEST(headless_demo_is_inspected_from_another_process) {
  tu_rundir(dir, sizeof dir);
  pid_t pid = tu_fork();
  if (pid == 0) {
    char d[300];
    snprintf(d, sizeof d, "%s", dir);
    execl(SPY_TOOL_PATH, "spyglass", "demo", "--headless", "--seconds", "20",
          "--dir", d, "--name", "headless-demo", "--load", "2", (char *)NULL);
    _exit(127);
  }
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir, .query_initial_ms = 50};
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  double end = tu_now_s() + 15;
  while (tu_now_s() < end &&
         !(s->conn == SPY_CONN_CONNECTED && s->samples > 100 &&
           !isnan(spy_state_last(s, SPY_FIELD_GPU_MS)) &&
           spy_state_find(&s->registry, "camera.position")))
    spy_consumer_poll(c, 50);
  CHECK_STR(s->provider_name, "headless-demo");
  CHECK(spy_state_last(s, SPY_FIELD_FPS) > 1);
  CHECK(spy_state_last(s, SPY_FIELD_GPU_MS) > 0);
  int draws = spy_state_counter(s, "draws"),
      parts = spy_state_counter(s, "particles");
  CHECK(draws >= 0 && parts >= 0);
  CHECK(spy_state_last(s, SPY_FIELD_COUNTER0 + (uint32_t)parts) == 40000);
  const spy_state_entry *cam = spy_state_find(&s->registry, "camera.position");
  CHECK(cam && cam->value.kind == SPY_VAL_FLOAT3);
  const spy_state_entry *ad = spy_state_find(&s->env, "adapter");
  CHECK(ad && strstr(ad->value.v.s.ptr, "software"));
  spy_consumer_destroy(c);
  kill(pid, SIGTERM); /* a clean exit on SIGTERM */
  CHECK_EQ(tu_wait(pid, 10), 0);
  tu_rm_rf(dir);
}

TEST(demo_rejects_bad_options_with_exit_2) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "%s demo --load 0 2>/dev/null", SPY_TOOL_PATH);
  CHECK_EQ(WEXITSTATUS(system(cmd)), 2);
  snprintf(cmd, sizeof cmd, "%s demo --bogus 2>/dev/null", SPY_TOOL_PATH);
  CHECK_EQ(WEXITSTATUS(system(cmd)), 2);
  snprintf(cmd, sizeof cmd, "%s demo --help >/dev/null", SPY_TOOL_PATH);
  CHECK_EQ(WEXITSTATUS(system(cmd)), 0);
}

TEST_MAIN(
    TEST_CASE(demo_watches_itself_and_prints_live_stats_without_a_terminal),
    TEST_CASE(headless_demo_is_inspected_from_another_process),
    TEST_CASE(demo_rejects_bad_options_with_exit_2))
