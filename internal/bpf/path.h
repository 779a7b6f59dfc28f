/* SPDX-License-Identifier: GPL-2.0 */
/* File paths, part of capture.c: the names of the dentries from a struct
 * path up to the root of its mount namespace, crossing mount points
 * (CAP_PATH). The kernel's structs are read through BTF relocations. */
#ifndef TRAWL_PATH_H
#define TRAWL_PATH_H

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct vfsmount {
	struct dentry *mnt_root;
} __attribute__((preserve_access_index));

/* fs/mount.h: the mount a struct vfsmount is part of. */
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
} __attribute__((preserve_access_index));

/* read_ptr reads the kernel pointer at p, 0 when it cannot. */
static __always_inline void *read_ptr(const void *p)
{
	void *v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), p);
	return v;
}

/* path_name appends the name of dentry d to f's data at data_len, if it
 * fits before end, and moves data_len past it. It returns the name's
 * length with its NUL, or 0 for none: a name that fills the room left
 * may be cut, and is left out. */
static __always_inline long path_name(struct frame *f, struct dentry *d, __u32 end)
{
	__u32 off = f->rec.data_len, size;
	long n;

	if (off >= end)
		return 0;
	size = end - off;
	asm volatile("" : "+r"(off), "+r"(size));
	size &= MAX_CAP - 1;
	n = bpf_probe_read_kernel_str(&f->data[off & (MAX_DATA - 1)], size,
				      read_ptr(__builtin_preserve_access_index(&d->d_name.name)));
	if (n <= 0 || n >= size)
		return 0;
	f->rec.data_len = off + n;
	return n;
}

/* copy_path copies the path of the struct path (a mount and a dentry
 * pointer) at data offset c->off into data[off...]: the names of its
 * dentries from the last up, each NUL-terminated, at most c->size bytes
 * and PATH_STEPS dentries and mount points. A whole path ends with the
 * name of the namespace's root ("/"), or of the topmost dentry of a file
 * in no mount tree (pipes, sockets), then an empty name. It returns the
 * bytes copied. The end so far is kept in f's data_len, not in a
 * register: read back from memory, it is a number the verifier knows
 * nothing of, the same in every iteration, so that it checks the loop's
 * iterations in one pass each rather than one per way through the ones
 * before. */
static __always_inline long copy_path(struct frame *f, __u32 off, const struct cap *c)
{
	__u32 at = c->off, end = off + c->size;
	struct dentry *d, *parent, *root;
	struct vfsmount *vfs;
	struct mount *m, *up;

	if (f->rec.cap_failed & (1 << (c->slot & 15)) || at + 16 > off)
		return 0;
	asm volatile("" : "+r"(at));
	__builtin_memcpy(&vfs, &f->data[at & (MAX_DATA - 1)], 8);
	__builtin_memcpy(&d, &f->data[(at + 8) & (MAX_DATA - 1)], 8);
	if (!vfs || !d)
		return 0;
	m = (void *)vfs - __builtin_preserve_field_info(((struct mount *)0)->mnt, BPF_CORE_FIELD_BYTE_OFFSET);
	if (end > MAX_DATA)
		end = MAX_DATA;
	f->rec.data_len = off;
	for (int i = 0; i < PATH_STEPS; i++) {
		parent = read_ptr(__builtin_preserve_access_index(&d->d_parent));
		root = read_ptr(__builtin_preserve_access_index(&vfs->mnt_root));
		if (d == root || d == parent) {
			up = read_ptr(__builtin_preserve_access_index(&m->mnt_parent));
			if (d == root && up && up != m) {
				/* The root of a mount: go on from its mount point. */
				d = read_ptr(__builtin_preserve_access_index(&m->mnt_mountpoint));
				m = up;
				vfs = __builtin_preserve_access_index(&up->mnt);
				if (!d)
					break;
				continue;
			}
			/* The root: its name, then the empty one. */
			if (path_name(f, d, end)) {
				__u32 last = f->rec.data_len;

				if (last < end) {
					f->data[last & (MAX_DATA - 1)] = 0;
					f->rec.data_len = last + 1;
				}
			}
			break;
		}
		if (!path_name(f, d, end) || !parent)
			break;
		d = parent;
	}
	return f->rec.data_len - off;
}

#endif
