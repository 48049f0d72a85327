/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-VM policy metadata parser: the documented form parses to exactly what
 * it says, with or without the namespace libvirt may strip; every bad
 * attribute, unknown element, garbage and oversized input is rejected with a
 * printable reason that names the culprit, and leaves the caller's policy
 * untouched; random mutations never crash.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vm_policy.h"

#define NS "https://vmmpower.org/xmlns/policy/1"

static int parse(const char *xml, struct vm_policy *p, char *err, size_t err_size)
{
        return vm_policy_parse_metadata(xml, strlen(xml), p, err, err_size);
}

static void assert_printable(const char *s)
{
        for (; *s; s++)
                assert_true(*s >= 0x20 && *s < 0x7f);
}

static void test_init(void **state)
{
        struct vm_policy p;

        memset(&p, 0xa5, sizeof(p));
        vm_policy_init(&p);
        assert_int_equal(p.source, VM_POLICY_DEFAULT);
        assert_int_equal(p.place_mode, PLACE_PACK);
        assert_false(p.has_place_mode);
        assert_false(p.hints.has_trust || p.hints.has_max_level || p.hints.has_boost_cap_ms ||
                     p.hints.has_rate_per_sec || p.hints.has_burst || p.hints.has_half_life_ns);
        assert_string_equal(p.error, "");
        assert_string_equal(vm_policy_source_to_string(VM_POLICY_DEFAULT), "default");
        assert_string_equal(vm_policy_source_to_string(VM_POLICY_METADATA), "metadata");
}

/* The documented example, as a user passes it to virsh (namespaced). */
static void test_full(void **state)
{
        static const char xml[] =
                "<vmmpower:policy xmlns:vmmpower=\"" NS "\">\n"
                "  <vmmpower:hints trust=\"full\" max-level=\"800\" boost-cap-ms=\"200\"\n"
                "                  rate-per-sec=\"20\" burst=\"40\" half-life-ms=\"1000\"/>\n"
                "  <vmmpower:placement mode=\"spread\"/>\n"
                "</vmmpower:policy>\n";
        struct vm_policy p;
        char err[VM_POLICY_ERROR_MAX] = "x", what[256];

        assert_int_equal(parse(xml, &p, err, sizeof(err)), 0);
        assert_string_equal(err, "");
        assert_int_equal(p.source, VM_POLICY_METADATA);
        assert_true(p.has_place_mode);
        assert_int_equal(p.place_mode, PLACE_SPREAD);
        assert_true(p.hints.has_trust);
        assert_int_equal(p.hints.trust, HINT_TRUST_FULL);
        assert_true(p.hints.has_max_level);
        assert_int_equal(p.hints.max_level, 800);
        assert_true(p.hints.has_boost_cap_ms);
        assert_int_equal(p.hints.boost_cap_ms, 200);
        assert_true(p.hints.has_rate_per_sec);
        assert_int_equal(p.hints.rate_per_sec, 20);
        assert_true(p.hints.has_burst);
        assert_int_equal(p.hints.burst, 40);
        assert_true(p.hints.has_half_life_ns);
        assert_int_equal(p.hints.half_life_ns, NSEC_PER_SEC);
        assert_string_equal(p.error, "");

        vm_policy_describe(&p, what, sizeof(what));
        assert_string_equal(what, "placement=spread trust=full max-level=800 boost-cap-ms=200 rate-per-sec=20 "
                                  "burst=40 half-life-ms=1000");
}

/* As virDomainGetMetadata may hand it back: default namespace, or none at all. */
static void test_namespace_forms(void **state)
{
        static const char *const ok[] = {
                "<policy xmlns=\"" NS "\"><hints trust=\"none\"/></policy>",
                "<policy><hints trust=\"none\"/></policy>",
                "<?xml version=\"1.0\"?>\n<policy>\n  <!-- set by ops -->\n  <hints trust=\"none\"/>\n</policy>\n",
                "<v:policy xmlns:v=\"" NS "\"><hints trust=\"none\"/></v:policy>",
        };
        struct vm_policy p;

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                char err[VM_POLICY_ERROR_MAX];
                int r = parse(ok[i], &p, err, sizeof(err));

                print_message("ok %zu: %d %s\n", i, r, err);
                assert_int_equal(r, 0);
                assert_true(p.hints.has_trust);
                assert_int_equal(p.hints.trust, HINT_TRUST_NONE);
                assert_false(p.has_place_mode);
                assert_int_equal(p.place_mode, PLACE_PACK);
        }
}

static void test_empty_policy_and_modes(void **state)
{
        static const struct {
                const char *mode;
                enum place_mode m;
        } modes[] = {
                { "pack", PLACE_PACK }, { "spread", PLACE_SPREAD }, { "dedicated", PLACE_DEDICATED },
                { "exclude", PLACE_EXCLUDE },
        };
        struct vm_policy p;
        char what[64];

        assert_int_equal(parse("<policy/>", &p, NULL, 0), 0);
        assert_int_equal(p.source, VM_POLICY_METADATA);
        assert_false(p.has_place_mode);
        vm_policy_describe(&p, what, sizeof(what));
        assert_string_equal(what, "nothing set");

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                char xml[128];

                snprintf(xml, sizeof(xml), "<policy><placement mode=\"%s\"/></policy>", modes[i].mode);
                assert_int_equal(parse(xml, &p, NULL, 0), 0);
                assert_true(p.has_place_mode);
                assert_int_equal(p.place_mode, modes[i].m);
        }
        /* a latency-sensitive VM's queueing budget */
        assert_int_equal(parse("<policy><placement mode=\"pack\" queue-budget-percent=\"0.1\"/></policy>", &p, NULL,
                               0), 0);
        assert_int_equal(p.queue_budget_bp, 10);
        vm_policy_describe(&p, what, sizeof(what));
        assert_string_equal(what, "placement=pack queue-budget=0.10%");
        assert_int_equal(parse("<policy><placement queue-budget-percent=\"100\" mode=\"pack\"/></policy>", &p,
                               NULL, 0), 0);
        assert_int_equal(p.queue_budget_bp, 10000);
        /* range ends */
        assert_int_equal(parse("<policy><hints max-level=\"0\" boost-cap-ms=\"0\" rate-per-sec=\"1\" burst=\"1\" "
                               "half-life-ms=\"1\"/></policy>", &p, NULL, 0), 0);
        assert_int_equal(p.hints.max_level, 0);
        assert_int_equal(p.hints.half_life_ns, NSEC_PER_MSEC);
        assert_int_equal(parse("<policy><hints max-level=\"1024\" boost-cap-ms=\"10000\" rate-per-sec=\"100000\" "
                               "burst=\"100000\" half-life-ms=\"3600000\"/></policy>", &p, NULL, 0), 0);
        assert_int_equal(p.hints.half_life_ns, 3600 * NSEC_PER_SEC);
}

static const struct bad_case {
        const char *xml;
        const char *needle;
} bad_cases[] = {
        /* each attribute, bad */
        { "<policy><hints trust=\"Full\"/></policy>", "trust=\"Full\" in <hints>: expected none, advisory or full" },
        { "<policy><hints trust=\"\"/></policy>", "trust=\"\"" },
        { "<policy><hints max-level=\"1025\"/></policy>", "max-level=\"1025\" in <hints>: out of range 0..1024" },
        { "<policy><hints max-level=\"-1\"/></policy>", "max-level=\"-1\" in <hints>: not a decimal number" },
        { "<policy><hints max-level=\"+5\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\" 5\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"5 \"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"0x10\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"1e3\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"99999999999\"/></policy>", "not a decimal number" },
        { "<policy><hints max-level=\"4294967296\"/></policy>", "not a decimal number" },
        { "<policy><hints boost-cap-ms=\"10001\"/></policy>",
          "boost-cap-ms=\"10001\" in <hints>: out of range 0..10000" },
        { "<policy><hints rate-per-sec=\"0\"/></policy>", "rate-per-sec=\"0\" in <hints>: out of range 1..100000" },
        { "<policy><hints rate-per-sec=\"100001\"/></policy>", "out of range 1..100000" },
        { "<policy><hints burst=\"0\"/></policy>", "burst=\"0\" in <hints>: out of range 1..100000" },
        { "<policy><hints half-life-ms=\"0\"/></policy>", "half-life-ms=\"0\" in <hints>: out of range 1..3600000" },
        { "<policy><hints half-life-ms=\"3600001\"/></policy>", "out of range 1..3600000" },
        { "<policy><hints half-life=\"2s\"/></policy>", "unknown attribute half-life in <hints>" },
        { "<policy><hints Trust=\"full\"/></policy>", "unknown attribute Trust in <hints>" },
        { "<policy xmlns:x=\"urn:x\"><hints x:trust=\"full\"/></policy>", "namespaced attribute trust in <hints>" },
        { "<policy><placement mode=\"Pack\"/></policy>", "mode=\"Pack\" in <placement>: expected pack, spread" },
        { "<policy><placement/></policy>", "<placement> without mode or manage-pins" },
        { "<policy><placement mode=\"pack\" cpus=\"0-3\"/></policy>", "unknown attribute cpus in <placement>" },
        { "<policy><placement mode=\"pack\" queue-budget-percent=\"0\"/></policy>",
          "queue-budget-percent=\"0\" in <placement>: expected 0.01..100" },
        { "<policy><placement mode=\"pack\" queue-budget-percent=\"0.001\"/></policy>", "at most two decimals" },
        { "<policy><placement mode=\"pack\" queue-budget-percent=\"101\"/></policy>", "expected 0.01..100" },
        { "<policy><placement queue-budget-percent=\"1\"/></policy>", "<placement> without mode" },
        /* structure */
        { "<policy version=\"1\"/>", "unknown attribute version in <policy>" },
        { "<policy><hints/><hints/></policy>", "more than one <hints>" },
        { "<policy><placement mode=\"pack\"/><placement mode=\"spread\"/></policy>", "more than one <placement>" },
        { "<policy><boost/></policy>", "unknown element <boost> in <policy>" },
        { "<policy><hints><trust>full</trust></hints></policy>", "unknown element <trust> in <hints>" },
        { "<policy>full</policy>", "text \"full\" in <policy>" },
        { "<policy><placement mode=\"pack\">x</placement></policy>", "text \"x\" in <placement>" },
        { "<hints trust=\"full\"/>", "root element is <hints>, expected <policy>" },
        { "<x:policy xmlns:x=\"https://vmmpower.org/xmlns/policy/2\"/>", "namespace" },
        { "<policy xmlns:x=\"urn:other\"><x:hints/></policy>", "<hints> in namespace \"urn:other\"" },
        { "<policy xmlns:x=\"urn:\x7f\"><x:hints/></policy>", "<hints> in namespace \"urn:\\x7f\"" },
        { "<policy><hints \xc3\xa9=\"1\"/></policy>", "unknown attribute \\xc3\\xa9 in <hints>" },
        { "<policy><?php echo 1 ?></policy>", "unexpected XML node" },
        { "<policy><hints trust=\"&bogus;\"/></policy>", "not well-formed" },
        /* garbage */
        { "", "empty metadata" },
        { "full", "not well-formed" },
        { "<policy>", "not well-formed" },
        { "<policy><hints trust=\"full\"></policy>", "not well-formed" },
        { "<policy><hints trust='full' trust='none'/></policy>", "not well-formed" },
        { "\xff\xfe<\x00p\x00", "not well-formed" },
        { "<policy>\x01</policy>", "not well-formed" },
        { "<!DOCTYPE policy [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]><policy>&b;</policy>", "DOCTYPE" },
        { "<policy><![CDATA[x]]></policy>", "DOCTYPE or CDATA" },
        { "<policy/><policy/>", "not well-formed" },
};

static void test_bad(void **state)
{
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                struct vm_policy p, before;
                char err[VM_POLICY_ERROR_MAX];
                int r;

                memset(&p, 0x5a, sizeof(p));
                memcpy(&before, &p, sizeof(p));
                r = parse(bad_cases[i].xml, &p, err, sizeof(err));
                print_message("bad %zu: %d %s\n", i, r, err);
                assert_int_equal(r, -EBADMSG);
                assert_non_null(strstr(err, bad_cases[i].needle));
                assert_printable(err);
                assert_memory_equal(&p, &before, sizeof(p));
        }
}

/* A NUL inside the given length, and hostile bytes in values, reported escaped. */
static void test_nul_and_escaping(void **state)
{
        static const char nul[] = "<policy>\0<hints/></policy>";
        struct vm_policy p;
        char err[VM_POLICY_ERROR_MAX];

        assert_int_equal(vm_policy_parse_metadata(nul, sizeof(nul) - 1, &p, err, sizeof(err)), -EBADMSG);
        assert_non_null(strstr(err, "NUL"));

        assert_int_equal(parse("<policy><hints trust=\"f&#xe9;&#x9;\"/></policy>", &p, err, sizeof(err)),
                         -EBADMSG);
        print_message("%s\n", err);
        assert_printable(err);
        assert_non_null(strstr(err, "trust=\"f\\xc3\\xa9\\x09\""));

        /* A reason longer than the buffer is cut, still terminated. */
        char small[16];
        assert_int_equal(parse("<policy><hints max-level=\"99999\"/></policy>", &p, small, sizeof(small)),
                         -EBADMSG);
        assert_int_equal(strlen(small), sizeof(small) - 1);
        /* No err buffer at all is fine. */
        assert_int_equal(parse("<policy><boost/></policy>", &p, NULL, 0), -EBADMSG);
        assert_int_equal(vm_policy_parse_metadata(NULL, 0, &p, NULL, 0), -EINVAL);
}

static void test_oversized(void **state)
{
        static const char head[] = "<policy><hints trust=\"full\"/>";
        static const char tail[] = "</policy>";
        size_t n = VM_POLICY_XML_MAX;
        char *buf = malloc(n + 2);
        struct vm_policy p;
        char err[VM_POLICY_ERROR_MAX];

        assert_non_null(buf);
        /* exactly the limit (whitespace padding): fine */
        memset(buf, ' ', n);
        memcpy(buf, head, strlen(head));
        memcpy(buf + n - strlen(tail), tail, strlen(tail));
        buf[n] = '\0';
        assert_int_equal(vm_policy_parse_metadata(buf, n, &p, err, sizeof(err)), 0);
        assert_int_equal(p.hints.trust, HINT_TRUST_FULL);

        /* one byte more: rejected before parsing */
        memmove(buf + 1, buf, n + 1);
        buf[0] = ' ';
        assert_int_equal(vm_policy_parse_metadata(buf, n + 1, &p, err, sizeof(err)), -EMSGSIZE);
        assert_non_null(strstr(err, "too large"));
        free(buf);

        /* a huge attribute value */
        buf = malloc(1 << 20);
        assert_non_null(buf);
        strcpy(buf, "<policy><hints trust=\"");
        memset(buf + strlen(buf), 'a', (1 << 20) - 64);
        strcpy(buf + (1 << 20) - 40, "\"/></policy>");
        assert_int_equal(parse(buf, &p, err, sizeof(err)), -EMSGSIZE);
        free(buf);
}

/* Merge with host defaults: metadata fields win, the rest are the defaults. */
static void test_merge(void **state)
{
        struct hint_policy defaults, out;
        struct vm_policy p;

        hint_policy_init(&defaults);
        defaults.rate_per_sec = 77;
        vm_policy_init(&p);
        assert_int_equal(vm_policy_hint_policy(&p, &defaults, &out), 0);
        assert_memory_equal(&out, &defaults, sizeof(out));

        assert_int_equal(parse("<policy><hints trust=\"full\" max-level=\"600\"/></policy>", &p, NULL, 0), 0);
        assert_int_equal(vm_policy_hint_policy(&p, &defaults, &out), 0);
        assert_int_equal(out.trust, HINT_TRUST_FULL);
        assert_int_equal(out.max_level, 600);
        assert_int_equal(out.rate_per_sec, 77);
        assert_int_equal(out.burst, HINT_DEFAULT_BURST);
        assert_int_equal(out.half_life_ns, HINT_DEFAULT_HALF_LIFE_NS);

        /* Overrides of a policy that is not from metadata are ignored. */
        p.source = VM_POLICY_DEFAULT;
        assert_int_equal(vm_policy_hint_policy(&p, &defaults, &out), 0);
        assert_int_equal(out.trust, defaults.trust);
}

static void test_place_mode_from_string(void **state)
{
        enum place_mode m = PLACE_EXCLUDE;

        assert_int_equal(vm_place_mode_from_string("dedicated", &m), 0);
        assert_int_equal(m, PLACE_DEDICATED);
        assert_int_equal(vm_place_mode_from_string("dedicated ", &m), -EINVAL);
        assert_int_equal(vm_place_mode_from_string("", &m), -EINVAL);
        assert_int_equal(vm_place_mode_from_string(NULL, &m), -EINVAL);
        assert_int_equal(m, PLACE_DEDICATED);
}

/* Random byte mutations of a good document: never a crash, only 0 or -EBADMSG. */
static void test_mutations(void **state)
{
        static const char good[] =
                "<vmmpower:policy xmlns:vmmpower=\"" NS "\"><vmmpower:hints trust=\"full\" max-level=\"800\" "
                "boost-cap-ms=\"200\" rate-per-sec=\"20\" burst=\"40\" half-life-ms=\"1000\"/>"
                "<vmmpower:placement mode=\"spread\"/></vmmpower:policy>";
        static const char alphabet[] = "<>/=\"'&;!?-: \n\0\xff" "abcz019";
        unsigned seed = 12345, ok = 0, bad = 0;

        for (int iter = 0; iter < 20000; iter++) {
                char buf[sizeof(good)];
                size_t len = sizeof(good) - 1;
                struct vm_policy p;
                char err[VM_POLICY_ERROR_MAX];
                int muts;

                memcpy(buf, good, sizeof(good));
                seed = seed * 1103515245u + 12345u;
                muts = 1 + (int) ((seed >> 16) % 4);
                for (int k = 0; k < muts; k++) {
                        seed = seed * 1103515245u + 12345u;
                        size_t at = (seed >> 8) % len;
                        seed = seed * 1103515245u + 12345u;
                        buf[at] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
                }
                seed = seed * 1103515245u + 12345u;
                if ((seed >> 16) % 5 == 0)
                        len = (seed >> 4) % len; /* truncated too */
                int r = vm_policy_parse_metadata(buf, len, &p, err, sizeof(err));
                assert_true(r == 0 || r == -EBADMSG);
                if (r == 0)
                        ok++;
                else {
                        bad++;
                        assert_printable(err);
                }
        }
        print_message("mutations: %u accepted, %u rejected\n", ok, bad);
        assert_true(bad > 0);
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "r");
        char *buf = calloc(1, 1 << 16);
        size_t n;

        assert_non_null(f);
        assert_non_null(buf);
        n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* The examples in the shipped domain XML and in the docs parse as they say. */
static void test_shipped_examples(void **state)
{
        static const char *const files[] = { "config/example-domain.xml", "docs/configuration.md" };
        const char *src = getenv("VMMPOWER_SOURCE_DIR");

        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                char path[512], err[VM_POLICY_ERROR_MAX];
                struct vm_policy p;
                char *text, *a, *b;

                snprintf(path, sizeof(path), "%s/%s", src && *src ? src : TEST_DATA_DIR "/../..", files[i]);
                text = slurp(path);
                a = strstr(text, "<vmmpower:policy ");
                assert_non_null(a);
                b = strstr(a, "</vmmpower:policy>");
                assert_non_null(b);
                b += strlen("</vmmpower:policy>");
                int r = vm_policy_parse_metadata(a, (size_t) (b - a), &p, err, sizeof(err));
                print_message("%s: %d %s\n", files[i], r, err);
                assert_int_equal(r, 0);
                assert_true(p.hints.has_trust);
                assert_int_equal(p.hints.trust, HINT_TRUST_FULL);
                assert_true(p.has_place_mode);
                free(text);
        }
}


/* manage-pins in <placement>: with or without a mode, yes/no only. */
static void test_manage_pins(void **state)
{
        struct vm_policy p;
        char err[VM_POLICY_ERROR_MAX], what[256];

        (void) state;
        assert_int_equal(parse("<policy><placement manage-pins=\"yes\"/></policy>", &p, err, sizeof(err)), 0);
        assert_true(p.manage_pins && p.has_manage_pins);
        assert_false(p.has_place_mode);
        assert_int_equal(p.place_mode, PLACE_PACK);
        vm_policy_describe(&p, what, sizeof(what));
        assert_string_equal(what, "manage-pins=yes");
        assert_int_equal(parse("<policy><placement mode=\"spread\" manage-pins=\"no\"/></policy>", &p, err,
                               sizeof(err)), 0);
        assert_false(p.manage_pins);
        assert_true(p.has_manage_pins && p.has_place_mode);
        assert_int_equal(p.place_mode, PLACE_SPREAD);
        assert_int_equal(parse("<policy><placement manage-pins=\"1\"/></policy>", &p, err, sizeof(err)), -EBADMSG);
        assert_string_equal(err, "manage-pins=\"1\" in <placement>: expected yes or no");
}

#define DOMAIN_HEAD "<domain type='qemu'><name>x</name><memory unit='KiB'>65536</memory>"

/* The operator's pins and memory binding in a persistent domain XML. */
static void test_domain_pins(void **state)
{
        struct vm_domain_pins d;
        struct vm_policy p;
        char what[64];

        (void) state;
        static const char plain[] = DOMAIN_HEAD "<vcpu placement='static'>2</vcpu></domain>";
        assert_int_equal(vm_policy_parse_domain_xml(plain, strlen(plain), &d), 0);
        assert_int_equal(d.pins, 0);
        assert_string_equal(d.mem_nodeset, "");

        static const char pinned[] = DOMAIN_HEAD "<vcpu placement='static'>2</vcpu>"
                                     "<cputune><shares>1024</shares><vcpupin vcpu='0' cpuset='1'/>"
                                     "<emulatorpin cpuset='0'/></cputune>"
                                     "<numatune><memory mode='strict' nodeset='1'/></numatune></domain>";
        assert_int_equal(vm_policy_parse_domain_xml(pinned, strlen(pinned), &d), 0);
        assert_int_equal(d.pins, VM_PIN_VCPUPIN | VM_PIN_EMULATORPIN);
        assert_string_equal(d.mem_nodeset, "1");
        assert_string_equal(d.mem_mode, "strict");
        vm_pins_describe(d.pins, what, sizeof(what));
        assert_string_equal(what, "vcpupin, emulatorpin");

        /* host defaults: left alone */
        vm_policy_init(&p);
        vm_policy_apply_domain(&p, &d);
        assert_true(p.pins_left_alone);
        assert_int_equal(p.place_mode, PLACE_EXCLUDE);
        assert_string_equal(p.mem_nodeset, "1");
        /* opt-in: managed, the metadata's mode stands */
        assert_int_equal(parse("<policy><placement mode=\"spread\" manage-pins=\"yes\"/></policy>", &p, NULL, 0), 0);
        vm_policy_apply_domain(&p, &d);
        assert_false(p.pins_left_alone);
        assert_int_equal(p.place_mode, PLACE_SPREAD);
        assert_int_equal(p.operator_pins, VM_PIN_VCPUPIN | VM_PIN_EMULATORPIN);

        static const char cpuset[] = DOMAIN_HEAD "<vcpu placement='static' cpuset='0-1'>2</vcpu>"
                                     "<cputune><shares>1024</shares></cputune>"
                                     "<numatune><memory nodeset='0-1,3'/></numatune></domain>";
        assert_int_equal(vm_policy_parse_domain_xml(cpuset, strlen(cpuset), &d), 0);
        assert_int_equal(d.pins, VM_PIN_VCPU_CPUSET);
        assert_string_equal(d.mem_nodeset, "0-1,3");
        assert_string_equal(d.mem_mode, "strict"); /* libvirt's default mode */
        vm_pins_describe(d.pins, what, sizeof(what));
        assert_string_equal(what, "vcpu cpuset");

        /* a pin elsewhere (iothreadpin, a <vcpupin> outside <cputune>) is not a vCPU pin */
        static const char other[] = DOMAIN_HEAD "<vcpu>1</vcpu><cputune><iothreadpin iothread='1' cpuset='0'/>"
                                    "</cputune><devices><vcpupin/></devices></domain>";
        assert_int_equal(vm_policy_parse_domain_xml(other, strlen(other), &d), 0);
        assert_int_equal(d.pins, 0);

        /* a nodeset that is not printable ASCII is shown as "?" (found by fuzz-vm_policy: an
         * out-of-bounds read when the scan met such a byte) */
        static const char odd[] = DOMAIN_HEAD "<numatune><memory nodeset='0half\323\215ife'/></numatune></domain>";
        assert_int_equal(vm_policy_parse_domain_xml(odd, strlen(odd), &d), 0);
        assert_string_equal(d.mem_nodeset, "?");

        /* a long list is kept as written (it was "?" from 64 bytes on); from VM_NODESET_MAX bytes, "?" */
        {
                char xml[2048], list[VM_NODESET_MAX + 64];
                size_t o = 0;

                for (unsigned n = 0; n < 64; n += 2)
                        o += (size_t) snprintf(list + o, sizeof(list) - o, "%s%u", n ? "," : "", n);
                assert_int_equal(strlen(list), 90);
                snprintf(xml, sizeof(xml), DOMAIN_HEAD "<numatune><memory nodeset='%s'/></numatune></domain>", list);
                assert_int_equal(vm_policy_parse_domain_xml(xml, strlen(xml), &d), 0);
                assert_string_equal(d.mem_nodeset, list);
                memset(list, '0', VM_NODESET_MAX);
                list[VM_NODESET_MAX] = '\0';
                snprintf(xml, sizeof(xml), DOMAIN_HEAD "<numatune><memory nodeset='%s'/></numatune></domain>", list);
                assert_int_equal(vm_policy_parse_domain_xml(xml, strlen(xml), &d), 0);
                assert_string_equal(d.mem_nodeset, "?");
                list[VM_NODESET_MAX - 1] = '\0';
                snprintf(xml, sizeof(xml), DOMAIN_HEAD "<numatune><memory nodeset='%s'/></numatune></domain>", list);
                assert_int_equal(vm_policy_parse_domain_xml(xml, strlen(xml), &d), 0);
                assert_string_equal(d.mem_nodeset, list);
        }

        assert_int_equal(vm_policy_parse_domain_xml("<policy/>", 9, &d), -EBADMSG);
        assert_int_equal(vm_policy_parse_domain_xml("<domain", 7, &d), -EBADMSG);
        assert_int_equal(vm_policy_parse_domain_xml("", 0, &d), -EBADMSG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_init),
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_namespace_forms),
                cmocka_unit_test(test_empty_policy_and_modes),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_nul_and_escaping),
                cmocka_unit_test(test_oversized),
                cmocka_unit_test(test_merge),
                cmocka_unit_test(test_place_mode_from_string),
                cmocka_unit_test(test_mutations),
                cmocka_unit_test(test_shipped_examples),
                cmocka_unit_test(test_manage_pins),
                cmocka_unit_test(test_domain_pins),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
