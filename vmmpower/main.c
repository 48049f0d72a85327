/* SPDX-License-Identifier: GPL-2.0-or-later */
/* vmmpowerd: options, configuration check, daemonizing; the loop is in daemon.c. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "version.h"

static void help(void)
{
        printf("Usage: vmmpowerd [OPTIONS]\n"
               "Hypervisor-level vCPU power scheduler: tracks every VM's vCPU threads.\n\n"
               "  -c --config PATH        configuration file (default %s/vmmpower.conf)\n"
               "  -f --foreground         do not daemonize (systemd runs it so)\n"
               "  -n --dry-run            plan and log, never change the host\n"
               "     --check-config       validate the configuration and conf.d, then exit\n"
               "     --dump-config        print the effective configuration, then exit\n"
               "     --once               one discovery and two periods, print what is tracked, exit\n"
               "     --restore            put back every host knob the journal records, then exit\n"
               "     --sysfs-root DIR     directory that stands for /sys\n"
               "     --procfs-root DIR    directory that stands for /proc\n"
               "     --control-socket P   control socket path\n"
               "     --log-level LEVEL    err, warning, notice, info, debug\n"
               "  -V --version            print the version\n"
               "  -h --help               this help\n",
               VMMPOWER_SYSCONFDIR);
}

/* Classic double fork; the parent exits only once the child reports that
 * start-up finished (so init scripts see start-up errors in the exit code). */
static int daemonize(int *ready_fd)
{
        int pipefd[2];
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid > 0) {
                char c = 1;
                close(pipefd[1]);
                if (read(pipefd[0], &c, 1) != 1)
                        _exit(EXIT_FAILURE);
                _exit(c == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
        }
        close(pipefd[0]);
        if (setsid() < 0)
                _exit(EXIT_FAILURE);
        pid = fork();
        if (pid < 0)
                _exit(EXIT_FAILURE);
        if (pid > 0)
                _exit(EXIT_SUCCESS);
        if (chdir("/") < 0)
                _exit(EXIT_FAILURE);
        *ready_fd = pipefd[1];
        return 0;
}

static void detach_stdio(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (fd < 0)
                return;
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
                close(fd);
}

/* The tracker keeps one fd per vCPU thread and pcpu_stat one per pCPU idle
 * state: raise the soft limit to the hard one, where the manager set it lower. */
static void raise_nofile(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_warning_errno(errno, "Failed to raise the open-file limit: %m, ignoring.");
        }
}

int main(int argc, char *argv[])
{
        enum { ARG_CHECK = 0x100, ARG_DUMP, ARG_ONCE, ARG_RESTORE, ARG_SYSFS, ARG_PROCFS, ARG_SOCKET, ARG_LOGLEVEL };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "foreground", no_argument, NULL, 'f' },
                { "dry-run", no_argument, NULL, 'n' },
                { "check-config", no_argument, NULL, ARG_CHECK },
                { "dump-config", no_argument, NULL, ARG_DUMP },
                { "once", no_argument, NULL, ARG_ONCE },
                { "restore", no_argument, NULL, ARG_RESTORE },
                { "sysfs-root", required_argument, NULL, ARG_SYSFS },
                { "procfs-root", required_argument, NULL, ARG_PROCFS },
                { "control-socket", required_argument, NULL, ARG_SOCKET },
                { "log-level", required_argument, NULL, ARG_LOGLEVEL },
                { "version", no_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        struct daemon_options opts = { 0 };
        bool foreground = false, check = false, dump = false, restore = false;
        struct daemon *d = NULL;
        int c, r, ready_fd = -1;

        while ((c = getopt_long(argc, argv, "c:fnVh", options, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        opts.config_path = optarg;
                        break;
                case 'f':
                        foreground = true;
                        break;
                case 'n':
                        opts.dry_run = true;
                        break;
                case ARG_CHECK:
                        check = true;
                        break;
                case ARG_DUMP:
                        dump = true;
                        break;
                case ARG_ONCE:
                        opts.once = true;
                        foreground = true;
                        break;
                case ARG_RESTORE:
                        restore = true;
                        break;
                case ARG_SYSFS:
                        opts.sysfs_root = optarg;
                        break;
                case ARG_PROCFS:
                        opts.procfs_root = optarg;
                        break;
                case ARG_SOCKET:
                        opts.control_socket = optarg;
                        break;
                case ARG_LOGLEVEL:
                        if (log_parse_level(optarg, &opts.log_level) < 0) {
                                fprintf(stderr, "vmmpowerd: invalid log level '%s'\n", optarg);
                                return 2;
                        }
                        opts.log_level_set = true;
                        break;
                case 'V':
                        printf("vmmpowerd %s\n", VMMPOWER_VERSION);
                        return 0;
                case 'h':
                        help();
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "vmmpowerd: unexpected argument '%s'\n", argv[optind]);
                return 2;
        }

        if (check || dump) {
                struct config_error err = { 0 };
                struct vp_config cfg;

                r = daemon_load_config(&opts, &cfg, &err);
                if (r < 0) {
                        if (err.line > 0)
                                fprintf(stderr, "%s:%u: %s\n", err.file, err.line, err.message);
                        else
                                fprintf(stderr, "%s: %s\n", err.file, err.message);
                        return 1;
                }
                if (dump)
                        config_dump(&cfg, stdout);
                else
                        printf("Configuration OK.\n");
                return 0;
        }

        if (restore) {
                struct config_error err = { 0 };
                struct vp_config cfg;

                r = daemon_load_config(&opts, &cfg, &err);
                if (r < 0) {
                        config_error_print(&err, stderr);
                        return 1;
                }
                log_set_max_level(cfg.log_level);
                r = daemon_restore_journal(&cfg);
                return r == 0 ? 0 : 1;
        }

        raise_nofile();
        r = daemon_new(&opts, &d);
        if (r < 0)
                return 1;
        if (!foreground) {
                r = daemonize(&ready_fd);
                if (r < 0) {
                        log_error_errno(r, "Failed to daemonize: %m");
                        daemon_free(d);
                        return 1;
                }
                detach_stdio();
                /* The lock went with the fork; the pid in it is the parent's. */
                (void) daemon_write_pid(d);
        }
        if (ready_fd >= 0) {
                char ok = 0;
                (void) write(ready_fd, &ok, 1);
                close(ready_fd);
        }
        r = daemon_run(d) < 0 ? 1 : daemon_exit_status(d);
        daemon_free(d);
        return r;
}
