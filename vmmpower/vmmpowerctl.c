/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vmmpowerctl: the command-line client of vmmpowerd's control socket. */
#include <ctype.h>
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

#include "config.h"
#include "control.h"
#include "util.h"
#include "version.h"

#define DEFAULT_SOCKET "/run/vmmpower/control.sock"
#define DEFAULT_CONFIG VMMPOWER_SYSCONFDIR "/vmmpower.conf"
#define EXIT_REPLY_ERROR 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3
#define REPLY_MAX (64u << 20)

/* The commands, for argument checks, help and --json.  The daemon's own
 * table (control.c) decides who may run what. */
static const struct command {
        const char *name;
        const char *args;     /* after the name in the usage line */
        const char *summary;  /* one line */
        const char *options;  /* lines of options specific to the command, or NULL */
        unsigned min_args, max_args;
        bool json;            /* --json is honoured; otherwise refused */
} commands[] = {
        { "status", "", "daemon state and counters", NULL, 0, 0, true },
        { "vms", "", "every tracked VM and vCPU with its load", NULL, 0, 0, true },
        { "cpus", "", "host CPUs: topology, busy share, idle-state residency", NULL, 0, 0, true },
        { "plan", "", "the planner's current plan with its reasons", NULL, 0, 0, true },
        { "top", " [--interval SEC] [--count N]", "status, cpus and vms, refreshed",
          "  -i, --interval SEC   refresh every SEC seconds, 0.1 to 3600 (default 1)\n"
          "  -n, --count N        stop after N refreshes (default: until interrupted)\n",
          0, 0, false },
        { "metrics", "", "all metrics in the Prometheus text format", NULL, 0, 0, false },
        { "notify", " [--] OPERATION DOMAIN", "tell the daemon a domain changed (the libvirt hook)",
          "  --                   ends the options: DOMAIN may start with '-'\n", 2, 2, false },
        { "reload", "", "re-read the configuration; an invalid one is reported with FILE:LINE", NULL, 0, 0,
          false },
        { "version", "", "version of the running daemon", NULL, 0, 0, true },
        { "help", " [COMMAND]", "this help, or the help of COMMAND", NULL, 0, 1, false },
};

static const struct command *find_command(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(name, commands[i].name) == 0)
                        return &commands[i];
        return NULL;
}

static void help(void)
{
        printf("Usage: vmmpowerctl [--socket PATH | --config FILE] [--json] COMMAND [ARGS]\n\n"
               "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                printf("  %-10s %s\n", commands[i].name, commands[i].summary);
        printf("\nOptions:\n"
               "  -s, --socket PATH    control socket (default: ControlSocket of the configuration)\n"
               "  -c, --config FILE    configuration to read ControlSocket from\n"
               "                       (default " DEFAULT_CONFIG " and its conf.d/)\n"
               "  -j, --json           JSON output (status, vms, cpus, plan, version)\n"
               "  -h, --help           this help; with a command, the command's help\n"
               "  -V, --version        version of vmmpowerctl\n\n"
               "'vmmpowerctl help COMMAND' or 'vmmpowerctl COMMAND --help' describes one command.\n"
               "Exit status: 0 ok, 1 the daemon answered with an error, 2 usage, 3 cannot connect.\n");
}

static void help_command(const struct command *c)
{
        printf("Usage: vmmpowerctl [--socket PATH | --config FILE]%s %s%s\n\n%c%s.\n",
               c->json ? " [--json]" : "", c->name, c->args, toupper((unsigned char) c->summary[0]),
               c->summary + 1);
        if (c->options)
                printf("\nOptions:\n%s", c->options);
        if (!c->json && strcmp(c->name, "help") != 0)
                printf("\n--json is not supported by %s.\n", c->name);
}

/*
 * The control socket: --socket, else $VMMPOWER_CONTROL_SOCKET, else
 * ControlSocket of --config FILE (or $VMMPOWER_CONFIG), else of the default
 * configuration and its conf.d/ (as vmmpowerd reads them), else the built-in
 * default.  An invalid explicit configuration is a usage error; an invalid
 * default one is reported and the built-in default socket used (so that
 * "vmmpowerctl reload" still reaches the daemon and gets its error).
 */
static int resolve_socket(const char *socket_opt, const char *config_opt, char *buf, size_t size)
{
        const char *env = getenv("VMMPOWER_CONTROL_SOCKET");
        const char *config = config_opt;
        struct config_error err = { 0 };
        struct vp_config *cfg;
        int r;

        if (socket_opt) {
                snprintf(buf, size, "%s", socket_opt);
                return 0;
        }
        if (env && *env) {
                snprintf(buf, size, "%s", env);
                return 0;
        }
        if (!config || !*config)
                config = getenv("VMMPOWER_CONFIG");
        cfg = malloc(sizeof(*cfg));
        if (!cfg) {
                fprintf(stderr, "vmmpowerctl: out of memory\n");
                return EXIT_USAGE;
        }
        if (config && *config) {
                r = config_load(config, NULL, false, cfg, &err);
                if (r < 0) {
                        fputs("vmmpowerctl: ", stderr);
                        config_error_print(&err, stderr);
                        free(cfg);
                        return EXIT_USAGE;
                }
        } else {
                r = config_load(DEFAULT_CONFIG, NULL, true, cfg, &err);
                if (r < 0) {
                        fputs("vmmpowerctl: warning: ", stderr);
                        config_error_print(&err, stderr);
                        fprintf(stderr, "vmmpowerctl: warning: using the default control socket %s\n",
                                DEFAULT_SOCKET);
                        config_defaults(cfg);
                }
        }
        snprintf(buf, size, "%s", cfg->control_socket);
        free(cfg);
        return 0;
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
                int e = errno;

                if (e == EACCES || e == EPERM)
                        fprintf(stderr,
                                "vmmpowerctl: permission denied on %s: run as root, or as a member of the "
                                "group named by ControlGroup= in vmmpower.conf\n",
                                socket_path);
                else if (e == ENOENT || e == ECONNREFUSED)
                        fprintf(stderr, "vmmpowerctl: vmmpowerd is not running at %s (%s)\n", socket_path,
                                e == ENOENT ? "no such socket" : "nothing listening");
                else
                        fprintf(stderr, "vmmpowerctl: cannot connect to %s: %s\n", socket_path, strerror(e));
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
                { "config", required_argument, NULL, 'c' },
                { "json", no_argument, NULL, 'j' },
                { "interval", required_argument, NULL, 'i' },
                { "count", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *socket_opt = NULL, *config_opt = NULL;
        char socket_path[CONFIG_PATH_MAX];
        const struct command *cmd;
        bool json = false, want_help = false, top_opts = false;
        double interval_s = 1.0;
        long count = 0;
        unsigned n_args;
        struct strbuf line, reply;
        int c, r;

        /* One pass; GNU getopt moves options after the command too
         * ("vmmpowerctl top --count 3"); "--" ends options, so that a domain
         * name starting with '-' is an argument (the libvirt hook uses it). */
        while ((c = getopt_long(argc, argv, "s:c:ji:n:hV", options, NULL)) >= 0) {
                switch (c) {
                case 's':
                        socket_opt = optarg;
                        break;
                case 'c':
                        config_opt = optarg;
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
                        top_opts = true;
                        break;
                }
                case 'n':
                        if (parse_int(optarg, &c) < 0 || c < 1) {
                                fprintf(stderr, "vmmpowerctl: --count takes a positive number\n");
                                return EXIT_USAGE;
                        }
                        count = c;
                        top_opts = true;
                        break;
                case 'h':
                        want_help = true;
                        break;
                case 'V':
                        printf("vmmpowerctl %s\n", VMMPOWER_VERSION);
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                if (want_help) {
                        help();
                        return 0;
                }
                help();
                return EXIT_USAGE;
        }
        cmd = find_command(argv[optind]);
        if (!cmd) {
                fprintf(stderr, "vmmpowerctl: unknown command '%s' (see vmmpowerctl --help)\n", argv[optind]);
                return EXIT_USAGE;
        }
        optind++;
        n_args = (unsigned) (argc - optind);
        if (want_help) {
                help_command(cmd);
                return 0;
        }
        if (strcmp(cmd->name, "help") == 0) {
                if (n_args > 1) {
                        fprintf(stderr, "vmmpowerctl: help takes at most one command\n");
                        return EXIT_USAGE;
                }
                if (n_args == 0) {
                        help();
                        return 0;
                }
                cmd = find_command(argv[optind]);
                if (!cmd) {
                        fprintf(stderr, "vmmpowerctl: unknown command '%s' (see vmmpowerctl --help)\n",
                                argv[optind]);
                        return EXIT_USAGE;
                }
                help_command(cmd);
                return 0;
        }
        if (n_args < cmd->min_args || n_args > cmd->max_args) {
                fprintf(stderr, "vmmpowerctl: usage: vmmpowerctl %s%s\n", cmd->name, cmd->args);
                return EXIT_USAGE;
        }
        if (json && !cmd->json) {
                fprintf(stderr, "vmmpowerctl: --json is not supported by %s%s\n", cmd->name,
                        strcmp(cmd->name, "metrics") == 0 ? " (Prometheus text format only)" : "");
                return EXIT_USAGE;
        }
        if (top_opts && strcmp(cmd->name, "top") != 0) {
                fprintf(stderr, "vmmpowerctl: --interval and --count apply to top only\n");
                return EXIT_USAGE;
        }
        r = resolve_socket(socket_opt, config_opt, socket_path, sizeof(socket_path));
        if (r != 0)
                return r;
        if (strcmp(cmd->name, "top") == 0)
                return top(socket_path, interval_s, count);

        strbuf_init(&line);
        strbuf_puts(&line, cmd->name);
        for (int i = optind; i < argc; i++) {
                /* The protocol separates words by single spaces; refuse what it can't carry. */
                if (!*argv[i] || strpbrk(argv[i], " \n")) {
                        fprintf(stderr, "vmmpowerctl: argument '%s' must be non-empty without spaces\n", argv[i]);
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
        strbuf_init(&reply);
        r = request(socket_path, line.data, &reply, 30000);
        if (r == 0)
                r = print_reply(&reply, stdout);
        strbuf_free(&reply);
        strbuf_free(&line);
        return r;
}
