/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-VM policy from libvirt domain metadata (see vm_policy.h).
 *
 * Who writes it: whoever may change the domain's definition (the host
 * administrator, a management layer), not the guest.  It is still parsed as
 * hostile input, because a management layer may pass tenant strings through
 * and because a mistake must not silently become a policy:
 *
 *  - at most VM_POLICY_XML_MAX bytes, no NUL bytes, no DOCTYPE (so no
 *    entities to expand), no network (XML_PARSE_NONET), libxml2's own
 *    reports off;
 *  - the root is <policy>, in our namespace or in none (libvirt hands the
 *    element back with the namespace it was stored under, or stripped);
 *  - known elements only (<hints>, <placement>), each at most once, no text
 *    but whitespace, no CDATA, processing instructions or entity references;
 *    comments are allowed;
 *  - known attributes only, unqualified; numbers are plain decimal digits
 *    (no sign, blanks or leading '+'), each within the range that
 *    hint_policy_validate() accepts, so any combination merges with any
 *    valid host defaults.
 *
 * The first problem found is the reason reported; nothing of a rejected
 * policy is used.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "vm_policy.h"

/* Attribute ranges: the same as hint_policy_validate(). */
#define MAX_LEVEL_MAX HINT_LEVEL_MAX
#define BOOST_CAP_MS_MAX HINT_BOOST_MS_MAX
#define RATE_MIN 1
#define RATE_MAX 100000
#define BURST_MIN 1
#define BURST_MAX 100000
#define HALF_LIFE_MS_MIN 1
#define HALF_LIFE_MS_MAX (3600 * 1000)

void vm_policy_init(struct vm_policy *p)
{
        memset(p, 0, sizeof(*p));
        p->source = VM_POLICY_DEFAULT;
        p->place_mode = PLACE_PACK;
}

const char *vm_policy_source_to_string(enum vm_policy_source s)
{
        switch (s) {
        case VM_POLICY_DEFAULT:
                return "default";
        case VM_POLICY_METADATA:
                return "metadata";
        default:
                return "unknown";
        }
}

int vm_place_mode_from_string(const char *s, enum place_mode *ret)
{
        if (!s)
                return -EINVAL;
        for (unsigned m = 0; m < _PLACE_MODE_MAX; m++)
                if (strcmp(s, place_mode_to_string((enum place_mode) m)) == 0) {
                        *ret = (enum place_mode) m;
                        return 0;
                }
        return -EINVAL;
}

int vm_policy_hint_policy(const struct vm_policy *p, const struct hint_policy *defaults, struct hint_policy *ret)
{
        if (!p || p->source != VM_POLICY_METADATA)
                return hint_policy_merge(defaults, NULL, ret);
        return hint_policy_merge(defaults, &p->hints, ret);
}

void vm_policy_describe(const struct vm_policy *p, char *buf, size_t size)
{
        const struct hint_policy_override *o = &p->hints;
        struct strbuf sb;

        if (size == 0)
                return;
        strbuf_init(&sb);
        if (p->has_place_mode)
                strbuf_printf(&sb, " placement=%s", place_mode_to_string(p->place_mode));
        if (p->has_manage_pins)
                strbuf_printf(&sb, " manage-pins=%s", p->manage_pins ? "yes" : "no");
        if (p->queue_budget_bp)
                strbuf_printf(&sb, " queue-budget=%u.%02u%%", p->queue_budget_bp / 100, p->queue_budget_bp % 100);
        if (o->has_trust)
                strbuf_printf(&sb, " trust=%s", hint_trust_to_string(o->trust));
        if (o->has_max_level)
                strbuf_printf(&sb, " max-level=%u", o->max_level);
        if (o->has_boost_cap_ms)
                strbuf_printf(&sb, " boost-cap-ms=%u", o->boost_cap_ms);
        if (o->has_rate_per_sec)
                strbuf_printf(&sb, " rate-per-sec=%u", o->rate_per_sec);
        if (o->has_burst)
                strbuf_printf(&sb, " burst=%u", o->burst);
        if (o->has_half_life_ns)
                strbuf_printf(&sb, " half-life-ms=%lld", (long long) (o->half_life_ns / NSEC_PER_MSEC));
        if (sb.oom)
                snprintf(buf, size, "?");
        else
                snprintf(buf, size, "%s", sb.len ? sb.data + 1 : "nothing set");
        strbuf_free(&sb);
}

/* ---- parser ---- */

struct pctx {
        char *err;
        size_t err_size;
};

static int bad(struct pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct pctx *c, const char *fmt, ...)
{
        va_list ap;

        if (c->err && c->err_size > 0) {
                va_start(ap, fmt);
                vsnprintf(c->err, c->err_size, fmt, ap);
                va_end(ap);
        }
        return -EBADMSG;
}

/* Untrusted bytes for a message: escaped and short. */
static const char *shown(const xmlChar *s, char *buf, size_t size)
{
        escape_bytes(s, s ? strlen((const char *) s) : 0, buf, size);
        return buf;
}

static bool ns_ok(const xmlNs *ns)
{
        return !ns || (ns->href && xmlStrcmp(ns->href, (const xmlChar *) VM_POLICY_XMLNS) == 0);
}

static bool is_xml_blank(xmlChar ch)
{
        return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* Children of an element other than the allowed elements: whitespace and comments only. */
static int check_other_child(struct pctx *c, const xmlNode *n, const char *parent)
{
        char b[40];

        switch (n->type) {
        case XML_COMMENT_NODE:
                return 0;
        case XML_TEXT_NODE:
                for (const xmlChar *p = n->content; p && *p; p++)
                        if (!is_xml_blank(*p))
                                return bad(c, "text \"%s\" in <%s>", shown(n->content, b, sizeof(b)), parent);
                return 0;
        case XML_ELEMENT_NODE:
                return bad(c, "unknown element <%s> in <%s>", shown(n->name, b, sizeof(b)), parent);
        default:
                return bad(c, "unexpected XML node (type %d) in <%s>", (int) n->type, parent);
        }
}

/* An attribute's value: one text child (no entity references). */
static int attr_value(struct pctx *c, const xmlAttr *a, const char *elem, const char **ret)
{
        const xmlNode *t = a->children;
        char b[40];

        if (!t) {
                *ret = "";
                return 0;
        }
        if (t->type != XML_TEXT_NODE || t->next || !t->content)
                return bad(c, "attribute %s of <%s>: entity references are not allowed",
                           shown(a->name, b, sizeof(b)), elem);
        *ret = (const char *) t->content;
        return 0;
}

static int parse_uint_attr(struct pctx *c, const char *elem, const char *name, const char *v, uint32_t min,
                           uint32_t max, uint32_t *ret)
{
        size_t n = strlen(v);
        uint32_t x;
        char b[40];

        for (size_t i = 0; i < n; i++)
                if (v[i] < '0' || v[i] > '9')
                        n = 0;
        if (n == 0 || n > 10 || parse_u32(v, &x) < 0)
                return bad(c, "%s=\"%s\" in <%s>: not a decimal number", name,
                           shown((const xmlChar *) v, b, sizeof(b)), elem);
        if (x < min || x > max)
                return bad(c, "%s=\"%s\" in <%s>: out of range %u..%u", name,
                           shown((const xmlChar *) v, b, sizeof(b)), elem, min, max);
        *ret = x;
        return 0;
}

static int parse_hints(struct pctx *c, const xmlNode *e, struct hint_policy_override *o)
{
        char b[40];
        int r;

        for (const xmlAttr *a = e->properties; a; a = a->next) {
                const char *name = (const char *) a->name, *v = "";
                uint32_t x;

                if (a->ns)
                        return bad(c, "namespaced attribute %s in <hints>", shown(a->name, b, sizeof(b)));
                r = attr_value(c, a, "hints", &v);
                if (r < 0)
                        return r;
                if (strcmp(name, "trust") == 0) {
                        if (hint_trust_from_string(v, &o->trust) < 0)
                                return bad(c, "trust=\"%s\" in <hints>: expected none, advisory or full",
                                           shown((const xmlChar *) v, b, sizeof(b)));
                        o->has_trust = true;
                } else if (strcmp(name, "max-level") == 0) {
                        r = parse_uint_attr(c, "hints", name, v, 0, MAX_LEVEL_MAX, &o->max_level);
                        if (r < 0)
                                return r;
                        o->has_max_level = true;
                } else if (strcmp(name, "boost-cap-ms") == 0) {
                        r = parse_uint_attr(c, "hints", name, v, 0, BOOST_CAP_MS_MAX, &o->boost_cap_ms);
                        if (r < 0)
                                return r;
                        o->has_boost_cap_ms = true;
                } else if (strcmp(name, "rate-per-sec") == 0) {
                        r = parse_uint_attr(c, "hints", name, v, RATE_MIN, RATE_MAX, &o->rate_per_sec);
                        if (r < 0)
                                return r;
                        o->has_rate_per_sec = true;
                } else if (strcmp(name, "burst") == 0) {
                        r = parse_uint_attr(c, "hints", name, v, BURST_MIN, BURST_MAX, &o->burst);
                        if (r < 0)
                                return r;
                        o->has_burst = true;
                } else if (strcmp(name, "half-life-ms") == 0) {
                        r = parse_uint_attr(c, "hints", name, v, HALF_LIFE_MS_MIN, HALF_LIFE_MS_MAX, &x);
                        if (r < 0)
                                return r;
                        o->half_life_ns = (nsec_t) x * NSEC_PER_MSEC;
                        o->has_half_life_ns = true;
                } else
                        return bad(c, "unknown attribute %s in <hints>", shown(a->name, b, sizeof(b)));
        }
        for (const xmlNode *n = e->children; n; n = n->next) {
                r = check_other_child(c, n, "hints");
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_placement(struct pctx *c, const xmlNode *e, struct vm_policy *p)
{
        char b[40];
        int r;

        for (const xmlAttr *a = e->properties; a; a = a->next) {
                const char *v = "";

                if (a->ns)
                        return bad(c, "namespaced attribute %s in <placement>", shown(a->name, b, sizeof(b)));
                r = attr_value(c, a, "placement", &v);
                if (r < 0)
                        return r;
                if (xmlStrcmp(a->name, (const xmlChar *) "mode") == 0) {
                        if (vm_place_mode_from_string(v, &p->place_mode) < 0)
                                return bad(c, "mode=\"%s\" in <placement>: expected pack, spread, dedicated or exclude",
                                           shown((const xmlChar *) v, b, sizeof(b)));
                        p->has_place_mode = true;
                } else if (xmlStrcmp(a->name, (const xmlChar *) "queue-budget-percent") == 0) {
                        if (parse_basis_points(v, &p->queue_budget_bp) < 0 || p->queue_budget_bp < 1 ||
                            p->queue_budget_bp > 10000)
                                return bad(c, "queue-budget-percent=\"%s\" in <placement>: expected 0.01..100, "
                                              "at most two decimals", shown((const xmlChar *) v, b, sizeof(b)));
                } else if (xmlStrcmp(a->name, (const xmlChar *) "manage-pins") == 0) {
                        if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
                                return bad(c, "manage-pins=\"%s\" in <placement>: expected yes or no",
                                           shown((const xmlChar *) v, b, sizeof(b)));
                        p->manage_pins = strcmp(v, "yes") == 0;
                        p->has_manage_pins = true;
                } else
                        return bad(c, "unknown attribute %s in <placement>", shown(a->name, b, sizeof(b)));
        }
        if (!p->has_place_mode && !p->has_manage_pins)
                return bad(c, "<placement> without mode or manage-pins");
        if (p->queue_budget_bp && !p->has_place_mode)
                return bad(c, "<placement> without mode: queue-budget-percent goes with a mode");
        for (const xmlNode *n = e->children; n; n = n->next) {
                r = check_other_child(c, n, "placement");
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_policy(struct pctx *c, const xmlNode *root, struct vm_policy *p)
{
        bool seen_hints = false, seen_placement = false;
        char b[40], b2[48];
        int r;

        if (!root || root->type != XML_ELEMENT_NODE || xmlStrcmp(root->name, (const xmlChar *) "policy") != 0)
                return bad(c, "root element is <%s>, expected <policy>",
                           shown(root ? root->name : NULL, b, sizeof(b)));
        if (!ns_ok(root->ns))
                return bad(c, "<policy> in namespace \"%s\", expected %s", shown(root->ns->href, b, sizeof(b)),
                           VM_POLICY_XMLNS);
        if (root->properties)
                return bad(c, "unknown attribute %s in <policy>", shown(root->properties->name, b, sizeof(b)));
        for (const xmlNode *n = root->children; n; n = n->next) {
                bool is_el = n->type == XML_ELEMENT_NODE;

                if (is_el && !ns_ok(n->ns))
                        return bad(c, "<%s> in namespace \"%s\", expected %s", shown(n->name, b, sizeof(b)),
                                   shown(n->ns->href, b2, sizeof(b2)), VM_POLICY_XMLNS);
                if (is_el && xmlStrcmp(n->name, (const xmlChar *) "hints") == 0) {
                        if (seen_hints)
                                return bad(c, "more than one <hints>");
                        seen_hints = true;
                        r = parse_hints(c, n, &p->hints);
                } else if (is_el && xmlStrcmp(n->name, (const xmlChar *) "placement") == 0) {
                        if (seen_placement)
                                return bad(c, "more than one <placement>");
                        seen_placement = true;
                        r = parse_placement(c, n, p);
                } else
                        r = check_other_child(c, n, "policy");
                if (r < 0)
                        return r;
        }
        return 0;
}

/* "<!" begins a DOCTYPE, CDATA or a comment; only comments are welcome. */
static bool has_markup_declaration(const char *xml, size_t len)
{
        for (size_t i = 0; i + 1 < len; i++)
                if (xml[i] == '<' && xml[i + 1] == '!' && (len - i < 4 || memcmp(xml + i, "<!--", 4) != 0))
                        return true;
        return false;
}

int vm_policy_parse_metadata(const char *xml, size_t len, struct vm_policy *ret, char *err, size_t err_size)
{
        struct pctx c = { .err = err, .err_size = err_size };
        struct vm_policy p;
        xmlDocPtr doc;
        int r;

        if (err && err_size > 0)
                err[0] = '\0';
        if (!xml || !ret)
                return -EINVAL;
        if (len > VM_POLICY_XML_MAX) {
                bad(&c, "metadata too large (%zu bytes, at most %d)", len, VM_POLICY_XML_MAX);
                return -EMSGSIZE;
        }
        if (len == 0)
                return bad(&c, "empty metadata");
        if (memchr(xml, '\0', len))
                return bad(&c, "NUL byte in metadata");
        if (has_markup_declaration(xml, len))
                return bad(&c, "DOCTYPE or CDATA in metadata");
        doc = xmlReadMemory(xml, (int) len, "metadata.xml", NULL,
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (!doc)
                return bad(&c, "not well-formed XML");
        vm_policy_init(&p);
        p.source = VM_POLICY_METADATA;
        if (doc->intSubset || doc->extSubset)
                r = bad(&c, "DOCTYPE in metadata");
        else
                r = parse_policy(&c, xmlDocGetRootElement(doc), &p);
        xmlFreeDoc(doc);
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}

/* ---- the operator's pins in the persistent domain XML ------------------- */

static const xmlNode *child_element(const xmlNode *parent, const char *name)
{
        for (const xmlNode *n = parent ? parent->children : NULL; n; n = n->next)
                if (n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, (const xmlChar *) name) == 0)
                        return n;
        return NULL;
}

/* A short printable attribute value into buf ("?" when it does not fit or is not printable). */
static void copy_attr(const xmlNode *e, const char *name, char *buf, size_t size)
{
        xmlChar *v = xmlGetProp(e, (const xmlChar *) name);
        size_t n;
        bool ok = true;

        buf[0] = '\0';
        if (!v)
                return;
        n = strlen((const char *) v);
        for (size_t i = 0; i < n; i++)
                if (v[i] < 0x20 || v[i] >= 0x7f)
                        ok = false; /* not printable ASCII: not shown */
        snprintf(buf, size, "%s", ok && n < size ? (const char *) v : "?");
        xmlFree(v);
}

int vm_policy_parse_domain_xml(const char *xml, size_t len, struct vm_domain_pins *ret)
{
        const xmlNode *root, *cputune, *vcpu, *numatune, *mem;
        xmlDocPtr doc;

        *ret = (struct vm_domain_pins) { 0 };
        if (!xml || len == 0 || len > INT_MAX || memchr(xml, '\0', len))
                return -EBADMSG;
        doc = xmlReadMemory(xml, (int) len, "domain.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                       XML_PARSE_NOWARNING | XML_PARSE_HUGE);
        if (!doc)
                return -EBADMSG;
        root = xmlDocGetRootElement(doc);
        if (!root || xmlStrcmp(root->name, (const xmlChar *) "domain") != 0) {
                xmlFreeDoc(doc);
                return -EBADMSG;
        }
        cputune = child_element(root, "cputune");
        if (child_element(cputune, "vcpupin"))
                ret->pins |= VM_PIN_VCPUPIN;
        if (child_element(cputune, "emulatorpin"))
                ret->pins |= VM_PIN_EMULATORPIN;
        vcpu = child_element(root, "vcpu");
        if (vcpu && xmlHasProp(vcpu, (const xmlChar *) "cpuset"))
                ret->pins |= VM_PIN_VCPU_CPUSET;
        numatune = child_element(root, "numatune");
        mem = child_element(numatune, "memory");
        if (mem) {
                copy_attr(mem, "nodeset", ret->mem_nodeset, sizeof(ret->mem_nodeset));
                if (ret->mem_nodeset[0]) {
                        copy_attr(mem, "mode", ret->mem_mode, sizeof(ret->mem_mode));
                        if (!ret->mem_mode[0])
                                snprintf(ret->mem_mode, sizeof(ret->mem_mode), "strict"); /* libvirt's default */
                }
        }
        xmlFreeDoc(doc);
        return 0;
}

void vm_policy_apply_domain(struct vm_policy *p, const struct vm_domain_pins *d)
{
        p->operator_pins = d->pins;
        p->pins_left_alone = d->pins && !p->manage_pins;
        if (p->pins_left_alone)
                p->place_mode = PLACE_EXCLUDE;
        snprintf(p->mem_nodeset, sizeof(p->mem_nodeset), "%s", d->mem_nodeset);
        snprintf(p->mem_mode, sizeof(p->mem_mode), "%s", d->mem_mode);
}

void vm_pins_describe(unsigned pins, char *buf, size_t size)
{
        snprintf(buf, size, "%s%s%s%s%s", pins & VM_PIN_VCPUPIN ? "vcpupin" : "",
                 (pins & VM_PIN_VCPUPIN) && (pins & (VM_PIN_EMULATORPIN | VM_PIN_VCPU_CPUSET)) ? ", " : "",
                 pins & VM_PIN_EMULATORPIN ? "emulatorpin" : "",
                 (pins & VM_PIN_EMULATORPIN) && (pins & VM_PIN_VCPU_CPUSET) ? ", " : "",
                 pins & VM_PIN_VCPU_CPUSET ? "vcpu cpuset" : "");
}
