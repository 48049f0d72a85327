/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vmmpowerctl: the command-line client of vmmpowerd's control socket. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "util.h"
#include "version.h"

#define DEFAULT_SOCKET "/run/vmmpower/control.sock"
#define EXIT_REPLY_ERROR 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3
#define REPLY_MAX (64u << 20)

static void help(void)
{
        printf("Usage: vmmpowerctl [--socket PATH] [--json] COMMAND\n\n"
               "Commands:\n"
               "  status                  daemon state and counters\n"
               "  vms                     every tracked VM and vCPU with its load\n"
               "  cpus                    host CPUs: topology, busy share, idle-state residency\n"
               "  plan                    the planner's current plan with its reasons (advisory)\n"
               "  top [--interval S] [--count N]   status, cpus and vms, refreshed\n"
               "  metrics                 Prometheus text format\n"
               "  notify OP DOMAIN        tell the daemon a domain changed (libvirt hook)\n"
               "  reload                  re-read the configuration\n"
               "  version                 daemon version\n\n"
               "Exit status: 0 ok, 1 the daemon answered with an error, 2 usage, 3 cannot connect.\n");
}

/* Send one request, read the whole reply.  Returns 0 and *body, or an exit code. */
static int request(const char *socket_path, const char *line, struct strbuf *reply, int timeout_ms)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(line), off = 0;
        int fd;

        if (strlen(socket_path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "vmmpowerctl: socket path too long\n");
                return EXIT_USAGE;
        }
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                fprintf(stderr, "vmmpowerctl: cannot connect to %s: %s (is vmmpowerd running?)\n", socket_path,
                        strerror(errno));
                if (fd >= 0)
                        close(fd);
                return EXIT_CONNECT;
        }
        while (off < len) {
                ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "vmmpowerctl: send failed: %s\n", strerror(errno));
                        close(fd);
                        return EXIT_CONNECT;
                }
                off += (size_t) n;
        }
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char buf[65536];
                ssize_t n;
                int r = poll(&p, 1, timeout_ms);

                if (r == 0) {
                        fprintf(stderr, "vmmpowerctl: no reply from vmmpowerd within %d ms\n", timeout_ms);
                        close(fd);
                        return EXIT_CONNECT;
                }
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        close(fd);
                        return EXIT_CONNECT;
                }
                n = read(fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        /* A refusal ("ERR EBUSY", "ERR EPERM") may be followed by a reset. */
                        if (errno == ECONNRESET && reply->len > 0)
                                break;
                        fprintf(stderr, "vmmpowerctl: read failed: %s\n", strerror(errno));
                        close(fd);
                        return EXIT_CONNECT;
                }
                if (n == 0)
                        break;
                strbuf_append(reply, buf, (size_t) n);
                if (reply->len > REPLY_MAX || reply->oom) {
                        fprintf(stderr, "vmmpowerctl: reply too large\n");
                        close(fd);
                        return EXIT_CONNECT;
                }
        }
        close(fd);
        return 0;
}

/* Print the body of an OK reply; report an ERR reply.  Returns the exit code. */
static int print_reply(const struct strbuf *reply, FILE *out)
{
        const char *data = reply->data ? reply->data : "";

        if (strncmp(data, "OK\n", 3) == 0) {
                fwrite(data + 3, 1, reply->len - 3, out);
                fflush(out);
                return 0;
        }
        if (strncmp(data, "ERR ", 4) == 0) {
                fprintf(stderr, "vmmpowerctl: vmmpowerd: %s", data + 4);
                return EXIT_REPLY_ERROR;
        }
        fprintf(stderr, "vmmpowerctl: malformed reply from vmmpowerd\n");
        return EXIT_REPLY_ERROR;
}

static int top(const char *socket_path, double interval_s, long count)
{
        bool tty = isatty(STDOUT_FILENO);

        for (long i = 0; count <= 0 || i < count; i++) {
                struct strbuf reply;
                int r;

                if (i > 0) {
                        struct timespec ts = { .tv_sec = (time_t) interval_s,
                                               .tv_nsec = (long) ((interval_s - (double) (time_t) interval_s) * 1e9) };
                        nanosleep(&ts, NULL);
                }
                strbuf_init(&reply);
                r = request(socket_path, "top\n", &reply, 5000);
                if (r == 0) {
                        if (tty)
                                fputs("\033[H\033[2J", stdout);
                        else if (i > 0)
                                fputs("\n", stdout);
                        r = print_reply(&reply, stdout);
                }
                strbuf_free(&reply);
                if (r != 0)
                        return r;
        }
        return 0;
}

int main(int argc, char *argv[])
{
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "interval", required_argument, NULL, 'i' },
                { "count", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *socket_path = getenv("VMMPOWER_CONTROL_SOCKET");
        bool json = false;
        double interval_s = 1.0;
        long count = 0;
        struct strbuf line, reply;
        int c, r;

        if (!socket_path || !*socket_path)
                socket_path = DEFAULT_SOCKET;
        /* One pass; GNU getopt moves options after the command too
         * ("vmmpowerctl top --count 3"); "--" ends options, so that a domain
         * name starting with '-' is an argument (the libvirt hook uses it). */
        while ((c = getopt_long(argc, argv, "s:ji:n:hV", options, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_path = optarg;
                        break;
                case 'j':
                        json = true;
                        break;
                case 'i': {
                        char *end;
                        interval_s = strtod(optarg, &end);
                        if (*end || !(interval_s >= 0.1 && interval_s <= 3600)) {
                                fprintf(stderr, "vmmpowerctl: --interval takes seconds, 0.1 to 3600\n");
                                return EXIT_USAGE;
                        }
                        break;
                }
                case 'n':
                        if (parse_int(optarg, &c) < 0 || c < 1) {
                                fprintf(stderr, "vmmpowerctl: --count takes a positive number\n");
                                return EXIT_USAGE;
                        }
                        count = c;
                        break;
                case 'h':
                        help();
                        return 0;
                case 'V':
                        printf("vmmpowerctl %s\n", VMMPOWER_VERSION);
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                help();
                return EXIT_USAGE;
        }
        {
                const char *cmd = argv[optind++];

                if (control_command_readonly(cmd) == -ENOENT) {
                        fprintf(stderr, "vmmpowerctl: unknown command '%s' (see --help)\n", cmd);
                        return EXIT_USAGE;
                }
                if (strcmp(cmd, "top") == 0) {
                        if (optind != argc) {
                                fprintf(stderr, "vmmpowerctl: top takes no arguments\n");
                                return EXIT_USAGE;
                        }
                        return top(socket_path, interval_s, count);
                }
                strbuf_init(&line);
                strbuf_puts(&line, cmd);
                for (int i = optind; i < argc; i++) {
                        /* The protocol separates words by single spaces; refuse what it can't carry. */
                        if (!*argv[i] || strpbrk(argv[i], " \n")) {
                                fprintf(stderr, "vmmpowerctl: argument '%s' must be non-empty without spaces\n",
                                        argv[i]);
                                strbuf_free(&line);
                                return EXIT_USAGE;
                        }
                        strbuf_printf(&line, " %s", argv[i]);
                }
                if (json)
                        strbuf_puts(&line, " --json");
                strbuf_puts(&line, "\n");
                if (line.len > CONTROL_LINE_MAX) {
                        fprintf(stderr, "vmmpowerctl: request too long\n");
                        strbuf_free(&line);
                        return EXIT_USAGE;
                }
        }
        strbuf_init(&reply);
        r = request(socket_path, line.data, &reply, 30000);
        if (r == 0)
                r = print_reply(&reply, stdout);
        strbuf_free(&reply);
        strbuf_free(&line);
        return r;
}
