/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt-src-probe: run the libvirt discovery source for N seconds and
 * print every snapshot it publishes, one line per domain, plus the source's
 * counters at the end.  For integration tests and manual checks:
 *
 *   libvirt-src-probe [--uri URI] [--run-dir DIR] [--procfs ROOT] [--seconds N] [--debug]
 *
 * Output (stable, line based):
 *   snapshot <n> t=<seconds> domains=<k>
 *   domain name=<escaped> uuid=<uuid> id=<id> pid=<pid> accel=<kvm|tcg|unknown> vcpus=<idx>:<tid>,...
 *   stats connected=<0|1> connects=<n> disconnects=<n> connect_failures=<n> events=<n> reconciles=<n> errors=<n>
 * Exit status 0, or 1 when the source could not be started.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvirt_src.h"
#include "log.h"
#include "util.h"

int main(int argc, char **argv)
{
        const char *uri = "qemu:///system", *run_dir = "/run/libvirt/qemu", *procfs = "/proc";
        static const struct option opts[] = {
                { "uri", required_argument, NULL, 'u' },
                { "run-dir", required_argument, NULL, 'r' },
                { "procfs", required_argument, NULL, 'p' },
                { "seconds", required_argument, NULL, 's' },
                { "debug", no_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        struct libvirt_src *ls = NULL;
        struct libvirt_src_stats st;
        double seconds = 10;
        unsigned snapshots = 0;
        nsec_t t0, end;
        int c, r;

        while ((c = getopt_long(argc, argv, "u:r:p:s:dh", opts, NULL)) >= 0)
                switch (c) {
                case 'u':
                        uri = optarg;
                        break;
                case 'r':
                        run_dir = optarg;
                        break;
                case 'p':
                        procfs = optarg;
                        break;
                case 's':
                        seconds = strtod(optarg, NULL);
                        if (!(seconds > 0 && seconds < 86400)) {
                                fprintf(stderr, "bad --seconds\n");
                                return 2;
                        }
                        break;
                case 'd':
                        log_set_max_level(LOG_LEVEL_DEBUG);
                        break;
                default:
                        fprintf(stderr, "usage: %s [--uri URI] [--run-dir DIR] [--procfs ROOT] [--seconds N] [--debug]\n",
                                argv[0]);
                        return c == 'h' ? 0 : 2;
                }

        setvbuf(stdout, NULL, _IOLBF, 0);
        r = libvirt_src_start(uri, run_dir, procfs, &ls);
        if (r < 0) {
                fprintf(stderr, "libvirt_src_start: %s\n", strerror(-r));
                return 1;
        }
        t0 = now_ns();
        end = t0 + (nsec_t) (seconds * NSEC_PER_SEC);
        for (;;) {
                struct pollfd p = { .fd = libvirt_src_fd(ls), .events = POLLIN };
                struct vm_info *vms = NULL;
                size_t n = 0;
                nsec_t now = now_ns();

                if (now >= end)
                        break;
                (void) poll(&p, 1, (int) MIN((end - now) / NSEC_PER_MSEC + 1, (nsec_t) 1000));
                r = libvirt_src_take(ls, &vms, &n);
                if (r < 0) {
                        fprintf(stderr, "libvirt_src_take: %s\n", strerror(-r));
                        break;
                }
                if (r == 0)
                        continue;
                printf("snapshot %u t=%.3f domains=%zu\n", ++snapshots, (now_ns() - t0) / 1e9, n);
                for (size_t i = 0; i < n; i++) {
                        char name[VM_NAME_MAX * 4];
                        struct strbuf sb;

                        escape_bytes(vms[i].name, strlen(vms[i].name), name, sizeof(name));
                        strbuf_init(&sb);
                        for (unsigned k = 0; k < vms[i].n_vcpus; k++)
                                strbuf_printf(&sb, "%s%d:%d", k ? "," : "", vms[i].vcpus[k].index, (int) vms[i].vcpus[k].tid);
                        printf("domain name=%s uuid=%s id=%d pid=%d accel=%s vcpus=%s\n", name,
                               vms[i].uuid[0] ? vms[i].uuid : "-", vms[i].libvirt_id, (int) vms[i].pid,
                               vm_accel_to_string(vms[i].accel), sb.data ? sb.data : "");
                        strbuf_free(&sb);
                }
                vm_info_free_array(vms, n);
        }
        libvirt_src_get_stats(ls, &st);
        printf("stats connected=%d connects=%llu disconnects=%llu connect_failures=%llu events=%llu reconciles=%llu errors=%llu\n",
               st.connected, (unsigned long long) st.connects, (unsigned long long) st.disconnects,
               (unsigned long long) st.connect_failures, (unsigned long long) st.events,
               (unsigned long long) st.reconciles, (unsigned long long) st.errors);
        libvirt_src_stop(ls);
        return 0;
}
