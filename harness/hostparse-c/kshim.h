/* SPDX-License-Identifier: GPL-2.0 */
/*
 * srpart: the kernel facilities block/partitions/ldm.c, aix.c, karma.c and
 * acorn.c (its ICS reader) use, for a host build (force-included with
 * -include; harness/hostparse.py makes the <linux/...> and <asm/...> headers
 * the parsers name empty files in inc/).
 */
#ifndef SRPART_KSHIM_H
#define SRPART_KSHIM_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include "check.h"

#define BUG_ON(c) do { if (c) { fprintf(stderr, "BUG at %s:%d\n", __FILE__, __LINE__); abort(); } } while (0)
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define __packed __attribute__((packed))
typedef int32_t s32;		/* acorn.c */

/* printk: ldm.c only calls it as printk("%s%s(): %pV\n", level, func, &vaf) */
struct va_format {
	const char *fmt;
	va_list *va;
};
#define KERN_CRIT	"<2>"
#define KERN_ERR	"<3>"
#define KERN_INFO	"<6>"
#define KERN_DEBUG	"<7>"
static inline void printk(const char *fmt, const char *level, const char *func,
			  struct va_format *vaf)
{
	va_list ap;

	if (strcmp(fmt, "%s%s(): %pV\n"))
		abort();
	va_copy(ap, *vaf->va);
	fprintf(stderr, "%sldm %s(): ", level, func);
	vfprintf(stderr, vaf->fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* strscpy_pad (6.12's ldm.c): copy, NUL-terminate, zero the rest */
static inline long strscpy_pad(char *dst, const char *src, size_t size)
{
	size_t len = strnlen(src, size);

	if (!size)
		return -E2BIG;
	if (len == size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -E2BIG;
	}
	memcpy(dst, src, len);
	memset(dst + len, 0, size - len);
	return len;
}

/* slab */
#define GFP_KERNEL 0
#define kmalloc(size, gfp) malloc(size)
#define kmalloc_array(n, size, gfp) calloc(n, size)
#define kzalloc(size, gfp) calloc(1, size)
#define kfree(p) free(p)
#define kcalloc(n, size, gfp) calloc(n, size)

/* aix.c */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define pr_warn(fmt, ...) fprintf(stderr, "<4>" fmt, ##__VA_ARGS__)

/* unaligned big-endian loads */
static inline u16 get_unaligned_be16(const void *p) { u16 v; memcpy(&v, p, 2); return be16toh(v); }
static inline u32 get_unaligned_be32(const void *p) { u32 v; memcpy(&v, p, 4); return be32toh(v); }
static inline u64 get_unaligned_be64(const void *p) { u64 v; memcpy(&v, p, 8); return be64toh(v); }
#define cpu_to_le16(x) htole16(x)

/* lists, as include/linux/list.h */
struct list_head {
	struct list_head *next, *prev;
};
#define LIST_HEAD_INIT(name) { &(name), &(name) }
#define LIST_HEAD(name) struct list_head name = LIST_HEAD_INIT(name)
static inline void INIT_LIST_HEAD(struct list_head *l) { l->next = l->prev = l; }
static inline void __list_add(struct list_head *n, struct list_head *prev, struct list_head *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}
static inline void list_add(struct list_head *n, struct list_head *head) { __list_add(n, head, head->next); }
static inline void list_add_tail(struct list_head *n, struct list_head *head) { __list_add(n, head->prev, head); }
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define list_entry(ptr, type, member) container_of(ptr, type, member)
#define list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)
#define list_for_each_safe(pos, n, head) \
	for (pos = (head)->next, n = pos->next; pos != (head); pos = n, n = pos->next)

/* uuid, as include/linux/uuid.h and lib/uuid.c (uuid_index: bytes in string order) */
typedef struct {
	u8 b[16];
} uuid_t;
static inline bool uuid_equal(const uuid_t *a, const uuid_t *b) { return !memcmp(a, b, 16); }
static inline void import_uuid(uuid_t *dst, const u8 *src) { memcpy(dst, src, 16); }
static inline int srpart_hex(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}
static inline int uuid_parse(const char *uuid, uuid_t *u)
{
	static const u8 si[16] = { 0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34 };
	int i;

	for (i = 0; i < 36; i++) {	/* uuid_is_valid() */
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (uuid[i] != '-')
				return -EINVAL;
		} else if (srpart_hex(uuid[i]) < 0) {
			return -EINVAL;
		}
	}
	for (i = 0; i < 16; i++)
		u->b[i] = srpart_hex(uuid[si[i]]) << 4 | srpart_hex(uuid[si[i] + 1]);
	return 0;
}

/* include/linux/msdos_partition.h */
#define MSDOS_LABEL_MAGIC 0xAA55
struct msdos_partition {
	u8 boot_ind;
	u8 head;
	u8 sector;
	u8 cyl;
	u8 sys_ind;
	u8 end_head;
	u8 end_sector;
	u8 end_cyl;
	__le32 start_sect;
	__le32 nr_sects;
} __attribute__((packed));

#endif
