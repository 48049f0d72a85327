/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hint_proto.h"
#include "policy_types.h"

/*
 * Per-VM policy: what the host administrator says about one VM in the
 * domain's libvirt metadata (docs/configuration.md, "Per-VM policy"), under
 * a versioned namespace:
 *
 *   <metadata>
 *     <vmmpower:policy xmlns:vmmpower="https://vmmpower.org/xmlns/policy/1">
 *       <vmmpower:hints trust="full" max-level="800" boost-cap-ms="200"
 *                       rate-per-sec="20" burst="40" half-life-ms="1000"/>
 *       <vmmpower:placement mode="spread"/>
 *       (or <vmmpower:placement mode="pack" queue-budget-percent="0.1"/>)
 *     </vmmpower:policy>
 *   </metadata>
 *
 * <placement manage-pins="yes"/> (mode optional then) lets vmmpower pin a
 * domain whose persistent XML has pins of the operator (below).
 *
 * Every element and attribute is optional; what is absent comes from the
 * host defaults ([Hints] in vmmpower.conf, placement pack).  The parser is
 * strict: an unknown element or attribute, a value out of range, text where
 * none belongs, a DTD or anything over VM_POLICY_XML_MAX bytes rejects the
 * whole policy, and the VM runs with the host defaults (the reason is kept
 * for vmmpowerctl and the log).  Pure: no I/O, no libvirt.
 */

#define VM_POLICY_XMLNS "https://vmmpower.org/xmlns/policy/1"
#define VM_POLICY_XMLNS_PREFIX "vmmpower"
#define VM_POLICY_XML_MAX 4096       /* bytes of metadata accepted; a policy is a few hundred */
#define VM_POLICY_ERROR_MAX 128
/* A <numatune> nodeset as written, with its NUL: "0,2,4,...,62" is 90 bytes; a longer one is "?". */
#define VM_NODESET_MAX 256

enum vm_policy_source {
        VM_POLICY_DEFAULT = 0, /* no usable metadata: host defaults (see error[] for rejected metadata) */
        VM_POLICY_METADATA,    /* the domain's vmmpower metadata (fields it does not set: host defaults) */
        _VM_POLICY_SOURCE_MAX,
};

struct vm_policy {
        enum vm_policy_source source;
        enum place_mode place_mode;        /* PLACE_PACK unless the metadata says otherwise */
        bool has_place_mode;               /* the metadata set it (<placement mode=...>) */
        uint32_t queue_budget_bp;          /* <placement queue-budget-percent=...> in hundredths of a
                                            * percent (1..10000); 0 = the host's QueueBudgetPercent.  Only
                                            * a budget tighter than the host's takes effect. */
        struct hint_policy_override hints; /* has_* set for each attribute of <hints> */
        bool manage_pins;                  /* <placement manage-pins="yes">: the operator's pins may be overridden */
        bool has_manage_pins;
        char error[VM_POLICY_ERROR_MAX];   /* "" or why the metadata was rejected (printable ASCII) */
        /* From the domain's persistent XML (vm_policy_apply_domain()), not the metadata: */
        unsigned operator_pins;            /* VM_PIN_* bits: pins the operator wrote */
        bool pins_left_alone;              /* operator_pins and no manage-pins: place_mode forced to exclude */
        char mem_nodeset[VM_NODESET_MAX];  /* <numatune><memory nodeset=...>, "" = none (node list as written) */
        char mem_mode[16];                 /* its mode: strict, preferred, interleave, restrictive ("" = none) */
};

/*
 * The operator's own pins and memory binding, read from a libvirt domain's
 * persistent definition (virDomainGetXMLDesc(VIR_DOMAIN_XML_INACTIVE)).  The
 * live XML will not do: it also lists the pins vmmpower itself made through
 * virDomainPinVcpuFlags(VIR_DOMAIN_AFFECT_LIVE) (checked on libvirt 9.0: a
 * live vcpupin and emulatorpin show in `virsh dumpxml`, not in
 * `virsh dumpxml --inactive`).
 */
enum {
        VM_PIN_VCPUPIN = 1 << 0,      /* <cputune><vcpupin> */
        VM_PIN_EMULATORPIN = 1 << 1,  /* <cputune><emulatorpin> */
        VM_PIN_VCPU_CPUSET = 1 << 2,  /* <vcpu cpuset=...>: every vCPU's default pin */
};

struct vm_domain_pins {
        unsigned pins;            /* VM_PIN_* */
        char mem_nodeset[VM_NODESET_MAX]; /* <numatune><memory nodeset>, "" = none; "?" if too long */
        char mem_mode[16];
};

/* Parse a domain XML (libvirt's own output).  0, or -EBADMSG if it is not a <domain>. */
int vm_policy_parse_domain_xml(const char *xml, size_t len, struct vm_domain_pins *ret);
/*
 * Put the domain's pins into the policy: operator pins without manage-pins
 * make the VM excluded (pins_left_alone); the memory binding is recorded.
 */
void vm_policy_apply_domain(struct vm_policy *p, const struct vm_domain_pins *d);
/* "vcpupin, emulatorpin": the VM_PIN_* bits as the XML names them. */
void vm_pins_describe(unsigned pins, char *buf, size_t size);

/* Host defaults: source default, placement pack, no hint overrides, no error. */
void vm_policy_init(struct vm_policy *p);
const char *vm_policy_source_to_string(enum vm_policy_source s);
/* "pack", "spread", "dedicated", "exclude" (exact).  Returns 0 or -EINVAL. */
int vm_place_mode_from_string(const char *s, enum place_mode *ret);

/*
 * Parse the metadata element as virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT)
 * returns it (the <policy> element, with or without its namespace).  Returns 0
 * and fills *ret (source metadata), or -EBADMSG (-EMSGSIZE when too large)
 * and writes the reason to err (printable ASCII, may be NULL), *ret untouched.
 */
int vm_policy_parse_metadata(const char *xml, size_t len, struct vm_policy *ret, char *err, size_t err_size);

/* "placement=spread trust=full max-level=800": what the policy sets ("nothing set" if nothing). */
void vm_policy_describe(const struct vm_policy *p, char *buf, size_t size);

/* The VM's effective hint policy: defaults with the metadata's overrides.  Returns 0 or -EINVAL. */
int vm_policy_hint_policy(const struct vm_policy *p, const struct hint_policy *defaults, struct hint_policy *ret);
