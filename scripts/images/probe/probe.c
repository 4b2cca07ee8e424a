/* ganglion-probe: a tiny static test workload for the executor's tests (issue 8).
 * Built by scripts/build-probe-image.sh into a FROM-scratch image (one file, /probe).
 * Arguments are a sequence of operations, run in order:
 *   echo TEXT            print TEXT and a newline to stdout
 *   err TEXT             print TEXT to stderr
 *   env NAME             print NAME=value (or NAME unset)
 *   write REL BYTES      write BYTES bytes (pattern: byte i = i*31+len(REL) mod 251) to /outputs/REL
 *   copy SRC DST         copy file SRC to DST (e.g. /inputs/a -> /outputs/a)
 *   sleep SECONDS        sleep
 *   alloc MIB            allocate and touch MIB MiB (an OOM test)
 *   sandbox              print uid/gid, CapEff, NoNewPrivs, whether / and /tmp are writable
 *   exit CODE            exit with CODE
 *   rank-exit RANK CODE  exit with CODE when GANGLION_NODE_RANK is RANK
 * Exits 0 after the last operation, 64 on a usage error. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkparents(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p == '/') {
      *p = 0;
      if (mkdir(path, 0755) != 0 && errno != EEXIST) { perror(path); return -1; }
      *p = '/';
    }
  }
  return 0;
}

static int write_pattern(const char *rel, long long n) {
  char path[4096];
  snprintf(path, sizeof path, "/outputs/%s", rel);
  if (mkparents(path) != 0) return -1;
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); return -1; }
  size_t salt = strlen(rel);
  static unsigned char buf[65536];
  long long done = 0;
  while (done < n) {
    size_t k = (size_t)((n - done) < (long long)sizeof buf ? (n - done) : (long long)sizeof buf);
    for (size_t i = 0; i < k; i++) buf[i] = (unsigned char)(((unsigned long long)(done + i) * 31 + salt) % 251);
    if (fwrite(buf, 1, k, f) != k) { perror("write"); fclose(f); return -1; }
    done += k;
  }
  return fclose(f);
}

static int copy_file(const char *src, char *dst) {
  FILE *in = fopen(src, "rb");
  if (!in) { perror(src); return -1; }
  if (mkparents(dst) != 0) { fclose(in); return -1; }
  FILE *out = fopen(dst, "wb");
  if (!out) { perror(dst); fclose(in); return -1; }
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
  fclose(in);
  return fclose(out);
}

static void print_status_line(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) { printf("%s: ?\n", key); return; }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, strlen(key)) == 0) { fputs(line, stdout); break; }
  }
  fclose(f);
}

static const char *writable(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return strerror(errno);
  close(fd);
  unlink(path);
  return "writable";
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *op = argv[i];
    const char *a = i + 1 < argc ? argv[i + 1] : NULL;
    const char *b = i + 2 < argc ? argv[i + 2] : NULL;
    if (!strcmp(op, "echo") && a) { printf("%s\n", a); i += 1; }
    else if (!strcmp(op, "err") && a) { fprintf(stderr, "%s\n", a); i += 1; }
    else if (!strcmp(op, "env") && a) { const char *v = getenv(a); if (v) printf("%s=%s\n", a, v); else printf("%s unset\n", a); i += 1; }
    else if (!strcmp(op, "write") && a && b) { if (write_pattern(a, atoll(b)) != 0) return 1; i += 2; }
    else if (!strcmp(op, "copy") && a && b) { char dst[4096]; snprintf(dst, sizeof dst, "%s", b); if (copy_file(a, dst) != 0) return 1; i += 2; }
    else if (!strcmp(op, "sleep") && a) { fflush(stdout); sleep((unsigned)atoi(a)); i += 1; }
    else if (!strcmp(op, "alloc") && a) {
      long long mib = atoll(a);
      for (long long m = 0; m < mib; m++) { char *p = malloc(1 << 20); if (!p) return 2; memset(p, 1, 1 << 20); }
      printf("allocated %lld MiB\n", mib); i += 1;
    }
    else if (!strcmp(op, "sandbox")) {
      printf("uid=%d gid=%d\n", (int)getuid(), (int)getgid());
      print_status_line("CapEff:");
      print_status_line("NoNewPrivs:");
      printf("root=%s\n", writable("/probe-root-write"));
      printf("tmp=%s\n", writable("/tmp/probe-tmp-write"));
      printf("outputs=%s\n", writable("/outputs/.probe-write"));
      printf("docker_sock=%s\n", access("/var/run/docker.sock", F_OK) == 0 ? "present" : "absent");
    }
    else if (!strcmp(op, "exit") && a) { fflush(stdout); return atoi(a); }
    else if (!strcmp(op, "rank-exit") && a && b) {
      const char *r = getenv("GANGLION_NODE_RANK");
      if (r && !strcmp(r, a)) { fflush(stdout); return atoi(b); }
      i += 2;
    }
    else { fprintf(stderr, "probe: bad operation at %s\n", op); return 64; }
    fflush(stdout);
  }
  return 0;
}
