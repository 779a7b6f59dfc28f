/* SPDX-License-Identifier: GPL-2.0 */
/* The address table, part of capture.c: kprobe programs find the function
 * they run for by its address (internal/backend/iptable.go). */
#ifndef TRAWL_IPTABLE_H
#define TRAWL_IPTABLE_H

volatile const __u32 ip_bits = 1; /* func_ips has 1 << ip_bits entries */

/* The address table of the kprobe backends: function addresses, placed
 * by the loader at their hash or up to IP_MAX_PROBES - 1 entries after. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2); /* resized by the loader */
	__type(key, __u32);
	__type(value, struct ip_func);
} func_ips SEC(".maps");

/* func_at returns the function a kprobe program runs for, found by its
 * address ip (bpf_get_func_ip) in the address table. The attach cookie
 * says the same, but a kprobe.multi link finds it by a binary search of
 * its addresses, with an indirect call per step: 80 instructions with
 * one function attached (amd64-7.3), more with thousands; the table takes
 * about 27 whatever their number. An address the table lacks falls back
 * to the cookie, counted. */
static __always_inline __u32 func_at(void *ctx, __u64 ip)
{
	__u32 mask = (1U << ip_bits) - 1;
	__u32 h = (ip * IP_HASH_MUL) >> (64 - ip_bits);

	for (int i = 0; i < IP_MAX_PROBES; i++) {
		__u32 k = (h + i) & mask;
		struct ip_func *e = bpf_map_lookup_elem(&func_ips, &k);

		if (!e || !e->ip)
			break;
		if (e->ip == ip)
			return e->func;
	}
	count(CNT_COOKIE_LOOKUPS);
	return bpf_get_attach_cookie(ctx);
}

#endif
