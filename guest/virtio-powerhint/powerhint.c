/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * powerhint: ask powerhintd for a boost or show its status.
 *
 *   powerhint boost 200ms [--cpu N]   boost the CPU this command runs on (or N)
 *   powerhint status
 *
 * One request line per connection to the agent's socket (default
 * /run/powerhintd.sock, --socket PATH to change); the reply is printed.
 * Exit status: 0 on "OK"/status, 1 on an "ERR" reply, 2 on usage errors,
 * 3 if the agent cannot be reached.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/powerhintd.sock"
#define BOOST_MS_MAX 10000

/* "200ms", "2s", or a bare number of milliseconds.  Returns 0 or -EINVAL. */
static int parse_ms(const char *s, uint32_t *ret)
{
        uint64_t v = 0, mult = 1;
        size_t n = 0;

        while (s[n] >= '0' && s[n] <= '9') {
                v = v * 10 + (unsigned) (s[n] - '0');
                if (v > BOOST_MS_MAX * 1000ull)
                        return -EINVAL;
                n++;
        }
        if (n == 0)
                return -EINVAL;
        if (strcmp(s + n, "s") == 0)
                mult = 1000;
        else if (strcmp(s + n, "ms") != 0 && s[n] != 0)
                return -EINVAL;
        v *= mult;
        if (v < 1 || v > BOOST_MS_MAX)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

static int request(const char *sock_path, const char *req)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char buf[4096];
        ssize_t n;
        int fd, rc = 0;
        bool first = true;

        if (strlen(sock_path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "powerhint: socket path too long\n");
                return 2;
        }
        strcpy(sa.sun_path, sock_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                fprintf(stderr, "powerhint: cannot reach powerhintd at %s: %s\n", sock_path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return 3;
        }
        if (write(fd, req, strlen(req)) != (ssize_t) strlen(req)) {
                fprintf(stderr, "powerhint: write: %s\n", strerror(errno));
                close(fd);
                return 3;
        }
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
                if (first && n >= 4 && memcmp(buf, "ERR ", 4) == 0)
                        rc = 1;
                first = false;
                fwrite(buf, 1, (size_t) n, stdout);
        }
        close(fd);
        return rc;
}

static void usage(FILE *f)
{
        fprintf(f, "Usage: powerhint [--socket PATH] boost DURATION [--cpu N]\n"
                   "       powerhint [--socket PATH] status\n"
                   "DURATION: 200ms, 1s or milliseconds, at most %u ms.\n",
                BOOST_MS_MAX);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "cpu", required_argument, NULL, 'c' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *sock_path = DEFAULT_SOCKET;
        char req[128];
        long cpu = -1;
        int c;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        sock_path = optarg;
                        break;
                case 'c': {
                        char *end;
                        errno = 0;
                        cpu = strtol(optarg, &end, 10);
                        if (errno || *end || end == optarg || cpu < 0 || cpu > 4095) {
                                fprintf(stderr, "powerhint: bad --cpu\n");
                                return 2;
                        }
                        break;
                }
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }
        if (strcmp(argv[optind], "status") == 0 && optind + 1 == argc)
                return request(sock_path, "STATUS\n");
        if (strcmp(argv[optind], "boost") == 0 && optind + 2 == argc) {
                uint32_t ms;

                if (parse_ms(argv[optind + 1], &ms) < 0) {
                        fprintf(stderr, "powerhint: bad duration \"%s\" (1ms..%us)\n", argv[optind + 1],
                                BOOST_MS_MAX / 1000);
                        return 2;
                }
                if (cpu < 0) {
                        cpu = sched_getcpu();
                        if (cpu < 0)
                                cpu = 0;
                }
                snprintf(req, sizeof(req), "BOOST %u %ld\n", ms, cpu);
                return request(sock_path, req);
        }
        usage(stderr);
        return 2;
}
