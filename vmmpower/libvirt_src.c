/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt discovery (see libvirt_src.h).
 *
 * Threading: everything that talks to libvirt runs on the source's own
 * thread, which runs libvirt's default event loop (virEventRunDefaultImpl).
 * Other threads only touch the published snapshot and the counters (under
 * ls->lock) and poke the loop through one "kick" timer: virEventUpdateTimeout
 * is thread safe and interrupts the loop, so stop and reconcile requests
 * are seen at once.  libvirt's default event implementation is process
 * global: one libvirt_src at a time per process.
 *
 * State machine: DISCONNECTED --open ok--> CONNECTED --close callback /
 * keepalive failure--> DISCONNECTED.  While disconnected a timer retries the
 * open after 1 s, doubling to 30 s; a successful open resets it.  Each state
 * change is logged once (with the reason); the failures in between are only
 * counted.  libvirt's own error reports go to log_debug (virSetErrorFunc),
 * never straight to stderr.
 *
 * Reconcile: list the active domains and, for each, read the QEMU pid and
 * the vCPU thread ids from libvirt's status XML (<run_dir>/<name>.xml, root
 * only).  When that file has no usable vCPUs, fall back to <run_dir>/<name>.pid
 * and the QEMU process's vCPU thread names (procscan_vcpus_of).  A domain
 * that stops between the listing and the read is skipped silently; any
 * other failure is counted in stats.errors and the domain is left out of
 * that snapshot.  Lifecycle and metadata-change events only schedule a
 * reconcile (coalesced through the kick timer), they are not interpreted;
 * metadata changes in other namespaces (and title/description) are ignored.
 * vCPU hot(un)plug (setvcpus --live) raises no event to listen for: no
 * lifecycle event, no DEVICE_ADDED/DEVICE_REMOVED (those are for <devices>
 * entries), no TUNABLE (live vcpupin/emulatorpin/schedinfo raise it, our own
 * pins included: a reconcile per pin).  So a snapshot's vCPU list can be out
 * of date until the next event; the tracker copes (vcpu_track.c: vCPUs merged
 * by index with the /proc scan's, a tid seen gone never reopened, a tid whose
 * thread is not named as the vCPU not opened).
 *
 * Per-VM policy (vm_policy.h): each reconcile reads every domain's live
 * metadata element in our namespace.  The thread remembers, per domain (UUID
 * and id: a domain started again is another run, whatever its UUID), a hash
 * of the last metadata it saw and the policy it gave, so that a change is
 * logged once (not at every lifecycle event of any domain), and a failed read
 * keeps the last known policy instead of flapping to defaults.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "libvirt_src.h"
#include "log.h"
#include "procscan.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define KEEPALIVE_INTERVAL_S 5
#define KEEPALIVE_COUNT 3
#define STATUS_XML_MAX (16 * 1024 * 1024)
/* PID_MAX_LIMIT on 64-bit Linux. */
#define LV_PID_MAX 4194304
/* Highest vCPU id accepted in a status XML (QEMU's own limit is far lower); ids from
 * VM_MAX_VCPUS up are counted in vm_info.n_vcpus_untracked, not tracked. */
#define LV_VCPU_ID_MAX 16777215

/*
 * What the last reconcile found in one domain's policy metadata (loop thread
 * only).  Keyed by UUID and domain id: the id changes at every start, so a
 * transient domain destroyed and created again with the same UUID between two
 * reconciles (events are lost while disconnected) is a new domain, whose
 * definition is read again.
 */
struct policy_seen {
        char uuid[VIR_UUID_STRING_BUFLEN];
        int id;                  /* virDomainGetID() of that run */
        uint64_t hash;           /* FNV-1a of the metadata, 0: none */
        struct vm_policy policy;
        bool domain_known;       /* domain below was read (persistent XML) */
        struct vm_domain_pins domain; /* the operator's pins and memory binding */
};

struct libvirt_src {
        char *uri;
        char *run_dir;
        char *procfs_root;
        int efd;
        pthread_t thread;
        bool thread_started;

        pthread_mutex_t lock; /* protects the fields down to stats */
        struct vm_info *snap;
        size_t n_snap;
        bool have_new;
        struct libvirt_src_stats stats;

        atomic_bool stop;
        atomic_bool reconcile_requested;
        int kick_timer;

        /* loop thread only */
        virConnectPtr conn;
        int lifecycle_cb;
        int metadata_cb;
        bool close_cb_registered;
        int reconnect_timer;
        int backoff_ms;
        bool lost;               /* the close callback fired, conn is dead */
        int last_logged_state;   /* -1 none, 0 disconnected, 1 connected */
        struct policy_seen *policy_seen; /* domains of the last reconcile, [n_policy_seen] */
        size_t n_policy_seen;
};

/* ---- status XML --------------------------------------------------------- */

static int xml_int_prop(xmlNodePtr n, const char *name, long long min, long long max, long long *ret)
{
        xmlChar *v = xmlGetProp(n, (const xmlChar *) name);
        int64_t x;
        int r;

        if (!v)
                return -ENOENT;
        r = parse_i64((const char *) v, &x);
        xmlFree(v);
        if (r < 0)
                return -EBADMSG;
        if (x < min || x > max)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static bool node_is(xmlNodePtr n, const char *name)
{
        return n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, (const xmlChar *) name) == 0;
}

static int cmp_vcpu(const void *a, const void *b)
{
        const struct vcpu_info *x = a, *y = b;

        return (x->index > y->index) - (x->index < y->index);
}

int libvirt_parse_status_xml(const char *xml, size_t len, struct vm_info *vm)
{
        xmlDocPtr doc;
        xmlNodePtr root, n;
        struct vcpu_info *v = NULL;
        unsigned nv = 0;
        enum vm_accel accel = VM_ACCEL_UNKNOWN;
        unsigned untracked = 0;
        long long pid, x;
        int r;

        if (!xml || !vm)
                return -EINVAL;
        if (len > STATUS_XML_MAX || len > INT32_MAX)
                return -EMSGSIZE;
        /* No network, no entities, no DTD loading; libvirt writes none of them. */
        doc = xmlReadMemory(xml, (int) len, "status.xml", NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (!doc)
                return -EBADMSG;
        r = -EBADMSG;
        root = xmlDocGetRootElement(doc);
        if (!root || !node_is(root, "domstatus"))
                goto out;
        if (xml_int_prop(root, "pid", 1, LV_PID_MAX, &pid) < 0)
                goto out;

        for (n = root->children; n; n = n->next) {
                if (node_is(n, "domain")) {
                        xmlChar *t = xmlGetProp(n, (const xmlChar *) "type");

                        if (t && xmlStrcmp(t, (const xmlChar *) "kvm") == 0)
                                accel = VM_ACCEL_KVM;
                        else if (t && xmlStrcmp(t, (const xmlChar *) "qemu") == 0)
                                accel = VM_ACCEL_TCG;
                        xmlFree(t);
                        continue;
                }
                if (!node_is(n, "vcpus"))
                        continue;
                if (v) /* two <vcpus> blocks */
                        goto out;
                for (xmlNodePtr c = n->children; c; c = c->next) {
                        struct vcpu_info *nvp;
                        long long id;

                        if (!node_is(c, "vcpu"))
                                continue;
                        if (xml_int_prop(c, "id", 0, LV_VCPU_ID_MAX, &id) < 0 ||
                            xml_int_prop(c, "pid", 1, LV_PID_MAX, &x) < 0)
                                goto out;
                        if (id >= VM_MAX_VCPUS) {
                                /* beyond what we track: the VM is kept, the vCPU counted (vm.h) */
                                untracked++;
                                continue;
                        }
                        if (nv >= VM_MAX_VCPUS)
                                goto out; /* more ids below VM_MAX_VCPUS than there are: a duplicate */
                        nvp = realloc(v, (nv + 1) * sizeof(*v));
                        if (!nvp) {
                                r = -ENOMEM;
                                goto out;
                        }
                        v = nvp;
                        v[nv++] = (struct vcpu_info) { .index = (int) id, .tid = (pid_t) x };
                }
        }
        if (nv > 0) {
                qsort(v, nv, sizeof(*v), cmp_vcpu);
                for (unsigned i = 1; i < nv; i++)
                        if (v[i].index == v[i - 1].index)
                                goto out;
                for (unsigned i = 0; i < nv; i++)
                        for (unsigned j = 0; j < i; j++)
                                if (v[i].tid == v[j].tid)
                                        goto out;
        }

        free(vm->vcpus);
        vm->vcpus = v;
        vm->n_vcpus = nv;
        vm->n_vcpus_untracked = untracked;
        vm->pid = (pid_t) pid;
        if (accel != VM_ACCEL_UNKNOWN)
                vm->accel = accel;
        v = NULL;
        r = 0;
out:
        free(v);
        xmlFreeDoc(doc);
        return r;
}

/*
 * The host end of the guest hint channel (docs/protocol.md): the source path
 * of <channel type='unix'> whose <target type='virtio'
 * name='org.vmmpower.hint.0'/>, from the live domain XML (or a status XML,
 * whose <domain> is a child of <domstatus>).  libvirt fills in
 * <source mode='bind' path='...'/> when the domain starts.
 */
static int channel_source_path(xmlNodePtr ch, char *path, size_t size)
{
        bool is_hint = false;
        xmlChar *src = NULL;
        int r = -ENOENT;

        for (xmlNodePtr c = ch->children; c; c = c->next) {
                if (node_is(c, "target")) {
                        xmlChar *t = xmlGetProp(c, (const xmlChar *) "type");
                        xmlChar *nm = xmlGetProp(c, (const xmlChar *) "name");

                        if (t && nm && xmlStrcmp(t, (const xmlChar *) "virtio") == 0 &&
                            xmlStrcmp(nm, (const xmlChar *) LIBVIRT_HINT_CHANNEL_NAME) == 0)
                                is_hint = true;
                        xmlFree(t);
                        xmlFree(nm);
                } else if (node_is(c, "source") && !src) {
                        xmlChar *mode = xmlGetProp(c, (const xmlChar *) "mode");

                        if (!mode || xmlStrcmp(mode, (const xmlChar *) "bind") == 0)
                                src = xmlGetProp(c, (const xmlChar *) "path");
                        xmlFree(mode);
                }
        }
        if (is_hint && src) {
                size_t len = strlen((const char *) src);

                r = 0;
                if (src[0] != '/')
                        r = -EBADMSG;
                for (size_t i = 0; r == 0 && i < len; i++)
                        if (src[i] < 0x20 || src[i] == 0x7f)
                                r = -EBADMSG;
                if (r == 0 && len >= size)
                        r = -ENAMETOOLONG;
                if (r == 0)
                        memcpy(path, src, len + 1);
        } else if (is_hint)
                r = -ENODATA; /* a hint channel without a source (not started yet) */
        xmlFree(src);
        return r;
}

int libvirt_parse_hint_channel(const char *xml, size_t len, char *path, size_t size)
{
        xmlDocPtr doc;
        xmlNodePtr root, dom = NULL;
        int r = -ENOENT;

        if (!xml || !path || size == 0)
                return -EINVAL;
        if (len > STATUS_XML_MAX || len > INT32_MAX)
                return -EMSGSIZE;
        doc = xmlReadMemory(xml, (int) len, "domain.xml", NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (!doc)
                return -EBADMSG;
        root = xmlDocGetRootElement(doc);
        if (root && node_is(root, "domain"))
                dom = root;
        else if (root && node_is(root, "domstatus"))
                for (xmlNodePtr n = root->children; n && !dom; n = n->next)
                        if (node_is(n, "domain"))
                                dom = n;
        if (!dom) {
                r = -EBADMSG;
                goto out;
        }
        for (xmlNodePtr d = dom->children; d; d = d->next) {
                if (!node_is(d, "devices"))
                        continue;
                for (xmlNodePtr c = d->children; c; c = c->next) {
                        xmlChar *t;
                        bool unix_ch;
                        int k;

                        if (!node_is(c, "channel"))
                                continue;
                        t = xmlGetProp(c, (const xmlChar *) "type");
                        unix_ch = t && xmlStrcmp(t, (const xmlChar *) "unix") == 0;
                        xmlFree(t);
                        if (!unix_ch)
                                continue;
                        k = channel_source_path(c, path, size);
                        if (k == -ENOENT)
                                continue;
                        r = k; /* the first hint channel decides */
                        goto out;
                }
        }
out:
        xmlFreeDoc(doc);
        return r;
}

/* ---- libvirt plumbing --------------------------------------------------- */

static void error_to_debug(void *userdata, virErrorPtr err)
{
        char m[512];

        if (!err || !err->message)
                return;
        escape_bytes(err->message, strlen(err->message), m, sizeof(m));
        log_debug("libvirt: %s (code %d, domain %d)", m, err->code, err->domain);
}

static void lv_global_init(void)
{
        virSetErrorFunc(NULL, error_to_debug);
        if (virInitialize() < 0)
                log_error("virInitialize() failed");
        if (virEventRegisterDefaultImpl() < 0)
                log_error("virEventRegisterDefaultImpl() failed");
}

static const char *lv_last_error(void)
{
        virErrorPtr e = virGetLastError();

        return e && e->message ? e->message : "unknown error";
}

static void kick(struct libvirt_src *ls)
{
        virEventUpdateTimeout(ls->kick_timer, 0);
}

static void log_state(struct libvirt_src *ls, int state, const char *reason)
{
        char m[256];

        if (ls->last_logged_state == state)
                return;
        ls->last_logged_state = state;
        escape_bytes(reason, strlen(reason), m, sizeof(m));
        if (state)
                log_info("Connected to libvirt at %s.", ls->uri);
        else
                log_warning("Not connected to libvirt at %s (%s), retrying with backoff up to %d s.",
                            ls->uri, m, BACKOFF_MAX_MS / 1000);
}

static int read_file_alloc(const char *path, size_t max, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = -1;
        char *buf = NULL;
        size_t len = 0, alloc = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t k;

                if (alloc - len < 4096) {
                        size_t na = alloc ? alloc * 2 : 65536;
                        char *nb;

                        if (na > max + 4096) {
                                if (alloc >= max + 1) {
                                        free(buf);
                                        return -EFBIG;
                                }
                                na = max + 4096;
                        }
                        nb = realloc(buf, na);
                        if (!nb) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = nb;
                        alloc = na;
                }
                k = read(fd, buf + len, alloc - len - 1);
                if (k < 0) {
                        int e = errno;
                        if (e == EINTR)
                                continue;
                        free(buf);
                        return -e;
                }
                if (k == 0)
                        break;
                len += (size_t) k;
                if (len > max) {
                        free(buf);
                        return -EFBIG;
                }
        }
        buf[len] = 0;
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* Fill vm->pid/vcpus for one domain; -ESRCH when it is gone. */
static int domain_threads(struct libvirt_src *ls, struct vm_info *vm)
{
        char path[4096];
        _cleanup_free_ char *xml = NULL;
        size_t len = 0;
        int r;

        if (strchr(vm->name, '/') || vm->name[0] == '.' || vm->name[0] == 0)
                return -EINVAL;

        r = path_printf(path, sizeof(path), "%s/%s.xml", ls->run_dir, vm->name);
        if (r < 0)
                return r;
        r = read_file_alloc(path, STATUS_XML_MAX, &xml, &len);
        if (r >= 0) {
                r = libvirt_parse_status_xml(xml, len, vm);
                if (r < 0)
                        log_debug_errno(r, "Failed to parse %s: %m", path);
                if (r >= 0 && vm->n_vcpus > 0)
                        return 0;
        } else if (r != -ENOENT)
                log_debug_errno(r, "Failed to read %s: %m", path);

        /* Fallback: the pid file and the vCPU thread names. */
        if (vm->pid <= 0) {
                char buf[32];
                int pid;

                r = path_printf(path, sizeof(path), "%s/%s.pid", ls->run_dir, vm->name);
                if (r < 0)
                        return r;
                r = read_small_file(path, buf, sizeof(buf));
                if (r < 0)
                        return r == -ENOENT ? -ESRCH : r;
                r = parse_int(buf, &pid);
                if (r < 0 || pid <= 0)
                        return -EBADMSG;
                vm->pid = pid;
        }
        return procscan_vcpus_of(ls->procfs_root, vm, NULL);
}

/* vm->hint_socket from the live XML; stays "" when the domain has no hint channel. */
static void domain_hint_channel(virDomainPtr dom, struct vm_info *vm)
{
        char *xml = virDomainGetXMLDesc(dom, 0);
        int r;

        vm->hint_socket[0] = '\0';
        if (!xml)
                return;
        r = libvirt_parse_hint_channel(xml, strlen(xml), vm->hint_socket, sizeof(vm->hint_socket));
        if (r < 0 && r != -ENOENT && r != -ENODATA)
                log_debug_errno(r, "No usable hint channel in the XML of domain %d: %m", vm->libvirt_id);
        if (r < 0)
                vm->hint_socket[0] = '\0';
        free(xml);
}

static uint64_t fnv1a(const char *s)
{
        uint64_t h = 14695981039346656037ull;

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ull;
        return h ? h : 1;
}

static const struct policy_seen *policy_seen_find(const struct libvirt_src *ls, const struct vm_info *vm)
{
        for (size_t i = 0; i < ls->n_policy_seen; i++)
                if (strcmp(ls->policy_seen[i].uuid, vm->uuid) == 0 && ls->policy_seen[i].id == vm->libvirt_id)
                        return &ls->policy_seen[i];
        return NULL;
}

static bool domain_gone(virDomainPtr dom);

/* Counters for one reconcile, added under the lock at its end. */
struct policy_tally {
        uint64_t policies, invalid, errors;
};

/*
 * vm->policy from the domain's live metadata in our namespace (vm_policy.h);
 * host defaults when there is none or it is rejected.  *seen gets what the next
 * reconcile compares with.  Logs changes only.
 */
static void domain_policy(struct libvirt_src *ls, virDomainPtr dom, struct vm_info *vm, struct policy_seen *seen,
                          struct policy_tally *t)
{
        const struct policy_seen *prev = policy_seen_find(ls, vm);
        char name[VM_NAME_MAX * 4], what[256], err[VM_POLICY_ERROR_MAX];
        char *xml;
        int r;

        vm_policy_init(&vm->policy);
        *seen = (struct policy_seen) { .hash = 0, .id = vm->libvirt_id };
        snprintf(seen->uuid, sizeof(seen->uuid), "%s", vm->uuid);
        escape_bytes(vm->name, strnlen(vm->name, sizeof(vm->name)), name, sizeof(name));

        xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VM_POLICY_XMLNS, VIR_DOMAIN_AFFECT_LIVE);
        if (!xml) {
                virErrorPtr e = virGetLastError();

                if (!e || e->code != VIR_ERR_NO_DOMAIN_METADATA) {
                        /* A failed read is no news: keep what we knew.  A domain that
                         * stopped since the listing is normal, not an error. */
                        char why[256];

                        snprintf(why, sizeof(why), "%s", lv_last_error());
                        if (!domain_gone(dom)) {
                                t->errors++;
                                log_debug("Failed to read the policy metadata of domain \"%s\": %s", name, why);
                        }
                        if (prev)
                                *seen = *prev;
                        vm->policy = seen->policy;
                        if (vm->policy.source == VM_POLICY_METADATA)
                                t->policies++;
                        return;
                }
                if (prev && prev->hash != 0)
                        log_info("Domain \"%s\": policy metadata removed, host defaults apply.", name);
                vm_policy_init(&seen->policy);
                return;
        }
        seen->hash = fnv1a(xml);
        r = vm_policy_parse_metadata(xml, strlen(xml), &vm->policy, err, sizeof(err));
        free(xml);
        if (r < 0) {
                vm_policy_init(&vm->policy);
                snprintf(vm->policy.error, sizeof(vm->policy.error), "%s", err);
                if (!prev || prev->hash != seen->hash) {
                        t->invalid++;
                        log_warning("Domain \"%s\": invalid vmmpower policy metadata (%s), host defaults apply.",
                                    name, err);
                }
        } else {
                t->policies++;
                if (!prev || prev->hash != seen->hash) {
                        vm_policy_describe(&vm->policy, what, sizeof(what));
                        log_info("Domain \"%s\": policy from metadata: %s.", name, what);
                }
        }
        seen->policy = vm->policy;
}

/*
 * The operator's pins (vm_policy.h): from the persistent definition, which
 * does not show vmmpower's own live pins.  A transient domain has none: its
 * definition is read once, at the first sight of that run (domain id; before
 * vmmpower pins it; a previous run's pins were restored at start), and that
 * answer is kept.  A failed read keeps the last answer.  Logs changes only.
 */
static void domain_operator_pins(struct libvirt_src *ls, virDomainPtr dom, struct vm_info *vm,
                                 struct policy_seen *seen)
{
        const struct policy_seen *prev = policy_seen_find(ls, vm);
        char name[VM_NAME_MAX * 4], what[64];
        int persistent = virDomainIsPersistent(dom);
        char *xml = NULL;

        if (prev && prev->domain_known && persistent == 0) {
                seen->domain = prev->domain;
                seen->domain_known = true;
        } else {
                xml = virDomainGetXMLDesc(dom, persistent == 0 ? 0 : VIR_DOMAIN_XML_INACTIVE);
                if (xml && vm_policy_parse_domain_xml(xml, strlen(xml), &seen->domain) == 0)
                        seen->domain_known = true;
                else if (prev && prev->domain_known) {
                        seen->domain = prev->domain;
                        seen->domain_known = true;
                }
                free(xml);
        }
        if (!seen->domain_known)
                return;
        vm_policy_apply_domain(&vm->policy, &seen->domain);
        if (prev && prev->domain_known && prev->domain.pins == seen->domain.pins &&
            prev->policy.manage_pins == vm->policy.manage_pins &&
            strcmp(prev->domain.mem_nodeset, seen->domain.mem_nodeset) == 0)
                return;
        escape_bytes(vm->name, strnlen(vm->name, sizeof(vm->name)), name, sizeof(name));
        vm_pins_describe(seen->domain.pins, what, sizeof(what));
        if (vm->policy.pins_left_alone)
                log_info("Domain \"%s\": the operator pinned it (<cputune>/<vcpu>: %s), leaving its placement alone "
                         "(<vmmpower:placement manage-pins=\"yes\"/> in its metadata lets vmmpower pin it).",
                         name, what);
        else if (seen->domain.pins)
                log_info("Domain \"%s\": the operator's pins (%s) are managed by vmmpower (manage-pins=yes).", name,
                         what);
        if (seen->domain.mem_nodeset[0])
                log_info("Domain \"%s\": memory bound to NUMA node(s) %s (%s).", name, seen->domain.mem_nodeset,
                         seen->domain.mem_mode);
}

static int cmp_vm(const void *a, const void *b)
{
        const struct vm_info *x = a, *y = b;

        return (x->pid > y->pid) - (x->pid < y->pid);
}

static bool domain_gone(virDomainPtr dom)
{
        int a = virDomainIsActive(dom);

        if (a == 0)
                return true;
        if (a < 0) {
                virErrorPtr e = virGetLastError();
                return e && e->code == VIR_ERR_NO_DOMAIN;
        }
        return false;
}

static void reconcile(struct libvirt_src *ls)
{
        virDomainPtr *doms = NULL;
        struct vm_info *vms = NULL;
        struct policy_seen *seen = NULL;
        struct policy_tally tally = { 0 };
        size_t n = 0;
        uint64_t errors = 0;
        int nd;

        atomic_store(&ls->reconcile_requested, false);
        if (!ls->conn || ls->lost)
                return;
        nd = virConnectListAllDomains(ls->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
        if (nd < 0) {
                log_debug("virConnectListAllDomains() failed: %s", lv_last_error());
                pthread_mutex_lock(&ls->lock);
                ls->stats.errors++;
                pthread_mutex_unlock(&ls->lock);
                return;
        }
        vms = calloc(nd ? (size_t) nd : 1, sizeof(*vms));
        seen = calloc(nd ? (size_t) nd : 1, sizeof(*seen));
        if (!vms || !seen)
                goto out;

        for (int i = 0; i < nd; i++) {
                struct vm_info *vm = &vms[n];
                const char *name = virDomainGetName(doms[i]);
                int id = (int) virDomainGetID(doms[i]);
                int r;

                *vm = (struct vm_info) { .libvirt_id = id == -1 ? -1 : id, .sources = VM_SOURCE_LIBVIRT };
                if (!name || strlen(name) >= sizeof(vm->name) ||
                    virDomainGetUUIDString(doms[i], vm->uuid) < 0) {
                        if (!domain_gone(doms[i]))
                                errors++;
                        continue;
                }
                strcpy(vm->name, name);
                r = domain_threads(ls, vm);
                if (r >= 0) {
                        domain_hint_channel(doms[i], vm);
                        domain_policy(ls, doms[i], vm, &seen[n], &tally);
                        domain_operator_pins(ls, doms[i], vm, &seen[n]);
                }
                if (r < 0) {
                        char esc[VM_NAME_MAX * 4];

                        vm_info_done(vm);
                        if (domain_gone(doms[i]))
                                continue;
                        escape_bytes(name, strlen(name), esc, sizeof(esc));
                        log_debug_errno(r, "No vCPU threads for domain \"%s\", skipping: %m", esc);
                        errors++;
                        continue;
                }
                n++;
        }
        qsort(vms, n, sizeof(*vms), cmp_vm);

        pthread_mutex_lock(&ls->lock);
        vm_info_free_array(ls->snap, ls->n_snap);
        ls->snap = vms;
        ls->n_snap = n;
        ls->have_new = true;
        ls->stats.reconciles++;
        ls->stats.errors += errors;
        ls->stats.policies = tally.policies;
        ls->stats.policy_invalid += tally.invalid;
        ls->stats.policy_errors += tally.errors;
        pthread_mutex_unlock(&ls->lock);
        vms = NULL;
        free(ls->policy_seen);
        ls->policy_seen = seen;
        ls->n_policy_seen = n;
        seen = NULL;
        (void) !write(ls->efd, &(uint64_t) { 1 }, sizeof(uint64_t));
out:
        free(vms);
        free(seen);
        for (int i = 0; i < nd; i++)
                virDomainFree(doms[i]);
        free(doms);
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
        struct libvirt_src *ls = opaque;

        pthread_mutex_lock(&ls->lock);
        ls->stats.events++;
        pthread_mutex_unlock(&ls->lock);
        atomic_store(&ls->reconcile_requested, true);
        kick(ls);
        return 0;
}

static void metadata_cb(virConnectPtr conn, virDomainPtr dom, int type, const char *nsuri, void *opaque)
{
        struct libvirt_src *ls = opaque;

        /* Titles, descriptions and other namespaces are not ours. */
        if (type != VIR_DOMAIN_METADATA_ELEMENT || (nsuri && strcmp(nsuri, VM_POLICY_XMLNS) != 0))
                return;
        pthread_mutex_lock(&ls->lock);
        ls->stats.metadata_events++;
        pthread_mutex_unlock(&ls->lock);
        atomic_store(&ls->reconcile_requested, true);
        kick(ls);
}

static const char *close_reason(int reason)
{
        switch (reason) {
        case VIR_CONNECT_CLOSE_REASON_ERROR:
                return "I/O error";
        case VIR_CONNECT_CLOSE_REASON_EOF:
                return "end of file: libvirtd went away";
        case VIR_CONNECT_CLOSE_REASON_KEEPALIVE:
                return "keepalive timeout";
        case VIR_CONNECT_CLOSE_REASON_CLIENT:
                return "closed by client";
        default:
                return "unknown reason";
        }
}

static void close_cb(virConnectPtr conn, int reason, void *opaque)
{
        struct libvirt_src *ls = opaque;

        ls->lost = true;
        pthread_mutex_lock(&ls->lock);
        ls->stats.connected = false;
        ls->stats.disconnects++;
        pthread_mutex_unlock(&ls->lock);
        log_state(ls, 0, close_reason(reason));
        /* retries at +1 s, then +2 s, +4 s, ... up to 30 s */
        virEventUpdateTimeout(ls->reconnect_timer, BACKOFF_MIN_MS);
        ls->backoff_ms = MIN(BACKOFF_MIN_MS * 2, BACKOFF_MAX_MS);
}

static void drop_conn(struct libvirt_src *ls)
{
        if (!ls->conn)
                return;
        if (ls->lifecycle_cb >= 0)
                virConnectDomainEventDeregisterAny(ls->conn, ls->lifecycle_cb);
        if (ls->metadata_cb >= 0)
                virConnectDomainEventDeregisterAny(ls->conn, ls->metadata_cb);
        if (ls->close_cb_registered)
                virConnectUnregisterCloseCallback(ls->conn, close_cb);
        virConnectClose(ls->conn);
        ls->conn = NULL;
        ls->lifecycle_cb = ls->metadata_cb = -1;
        ls->close_cb_registered = false;
        ls->lost = false;
}

static void try_connect(struct libvirt_src *ls)
{
        virConnectPtr c;

        drop_conn(ls);
        c = virConnectOpen(ls->uri);
        if (!c)
                goto fail;
        ls->conn = c;
        if (virConnectRegisterCloseCallback(c, close_cb, ls, NULL) < 0)
                goto fail;
        ls->close_cb_registered = true;
        if (virConnectSetKeepAlive(c, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT) < 0)
                log_debug("virConnectSetKeepAlive() failed: %s", lv_last_error());
        ls->lifecycle_cb = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                            VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), ls, NULL);
        if (ls->lifecycle_cb < 0)
                goto fail;
        ls->metadata_cb = virConnectDomainEventRegisterAny(c, NULL, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                                           VIR_DOMAIN_EVENT_CALLBACK(metadata_cb), ls, NULL);
        if (ls->metadata_cb < 0)
                log_debug("Metadata-change events unavailable: %s", lv_last_error());

        pthread_mutex_lock(&ls->lock);
        ls->stats.connected = true;
        ls->stats.connects++;
        pthread_mutex_unlock(&ls->lock);
        log_state(ls, 1, "");
        ls->backoff_ms = BACKOFF_MIN_MS;
        virEventUpdateTimeout(ls->reconnect_timer, -1);
        reconcile(ls);
        return;
fail:
        {
                char reason[256];

                snprintf(reason, sizeof(reason), "%s", lv_last_error());
                drop_conn(ls);
                pthread_mutex_lock(&ls->lock);
                ls->stats.connected = false;
                ls->stats.connect_failures++;
                pthread_mutex_unlock(&ls->lock);
                log_state(ls, 0, reason);
                virEventUpdateTimeout(ls->reconnect_timer, ls->backoff_ms);
                ls->backoff_ms = MIN(ls->backoff_ms * 2, BACKOFF_MAX_MS);
        }
}

static void reconnect_timer_cb(int timer, void *opaque)
{
        struct libvirt_src *ls = opaque;

        virEventUpdateTimeout(timer, -1);
        if (!atomic_load(&ls->stop))
                try_connect(ls);
}

static void kick_timer_cb(int timer, void *opaque)
{
        struct libvirt_src *ls = opaque;

        virEventUpdateTimeout(timer, -1);
        if (atomic_load(&ls->stop))
                return;
        if (atomic_load(&ls->reconcile_requested))
                reconcile(ls);
}

static void *thread_main(void *p)
{
        struct libvirt_src *ls = p;

        try_connect(ls);
        while (!atomic_load(&ls->stop))
                if (virEventRunDefaultImpl() < 0) {
                        log_error("libvirt event loop failed: %s", lv_last_error());
                        break;
                }
        drop_conn(ls);
        return NULL;
}

/* ---- public ------------------------------------------------------------- */

#define STOP_TIMEOUT_S 5

static void libvirt_src_free(struct libvirt_src *ls)
{
        if (!ls)
                return;
        if (ls->kick_timer >= 0)
                virEventRemoveTimeout(ls->kick_timer);
        if (ls->reconnect_timer >= 0)
                virEventRemoveTimeout(ls->reconnect_timer);
        if (ls->efd >= 0)
                close(ls->efd);
        vm_info_free_array(ls->snap, ls->n_snap);
        free(ls->policy_seen);
        pthread_mutex_destroy(&ls->lock);
        free(ls->uri);
        free(ls->run_dir);
        free(ls->procfs_root);
        free(ls);
}

int libvirt_src_start(const char *uri, const char *run_dir, const char *procfs_root,
                      struct libvirt_src **ret)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        struct libvirt_src *ls;
        int r;

        if (!uri || !run_dir || !procfs_root || !ret)
                return -EINVAL;
        pthread_once(&once, lv_global_init);

        ls = calloc(1, sizeof(*ls));
        if (!ls)
                return -ENOMEM;
        ls->efd = -1;
        ls->kick_timer = ls->reconnect_timer = -1;
        ls->lifecycle_cb = ls->metadata_cb = -1;
        ls->backoff_ms = BACKOFF_MIN_MS;
        ls->last_logged_state = -1;
        pthread_mutex_init(&ls->lock, NULL);
        ls->uri = strdup(uri);
        ls->run_dir = strdup(run_dir);
        ls->procfs_root = strdup(procfs_root);
        if (!ls->uri || !ls->run_dir || !ls->procfs_root) {
                r = -ENOMEM;
                goto fail;
        }
        ls->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ls->efd < 0) {
                r = -errno;
                goto fail;
        }
        ls->kick_timer = virEventAddTimeout(-1, kick_timer_cb, ls, NULL);
        ls->reconnect_timer = virEventAddTimeout(-1, reconnect_timer_cb, ls, NULL);
        if (ls->kick_timer < 0 || ls->reconnect_timer < 0) {
                r = -EIO;
                goto fail;
        }
        r = -pthread_create(&ls->thread, NULL, thread_main, ls);
        if (r < 0)
                goto fail;
        ls->thread_started = true;
        *ret = ls;
        return 0;
fail:
        libvirt_src_free(ls);
        return r;
}

void libvirt_src_stop(struct libvirt_src *ls)
{
        if (!ls)
                return;
        if (ls->thread_started) {
                struct timespec deadline;

                atomic_store(&ls->stop, true);
                kick(ls);
                /* Bounded: a libvirt call without a client-side timeout must not
                 * hang the daemon's loop (and trip the watchdog).  A thread that
                 * does not finish in time is left to finish alone, with its state. */
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_sec += STOP_TIMEOUT_S;
                if (pthread_timedjoin_np(ls->thread, NULL, &deadline) != 0) {
                        log_warning("libvirt thread did not stop within %d s (a libvirt call hangs), "
                                    "leaving it behind.", STOP_TIMEOUT_S);
                        pthread_detach(ls->thread);
                        return;
                }
        }
        libvirt_src_free(ls);
}

int libvirt_src_fd(const struct libvirt_src *ls)
{
        return ls ? ls->efd : -EINVAL;
}

int libvirt_src_take(struct libvirt_src *ls, struct vm_info **vms, size_t *n)
{
        uint64_t v;

        if (!ls || !vms || !n)
                return -EINVAL;
        if (read(ls->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                return -errno;
        pthread_mutex_lock(&ls->lock);
        if (!ls->have_new) {
                pthread_mutex_unlock(&ls->lock);
                return 0;
        }
        *vms = ls->snap;
        *n = ls->n_snap;
        ls->snap = NULL;
        ls->n_snap = 0;
        ls->have_new = false;
        pthread_mutex_unlock(&ls->lock);
        return 1;
}

void libvirt_src_request_reconcile(struct libvirt_src *ls)
{
        if (!ls)
                return;
        atomic_store(&ls->reconcile_requested, true);
        kick(ls);
}

void libvirt_src_get_stats(struct libvirt_src *ls, struct libvirt_src_stats *ret)
{
        if (!ls || !ret)
                return;
        pthread_mutex_lock(&ls->lock);
        *ret = ls->stats;
        pthread_mutex_unlock(&ls->lock);
}
