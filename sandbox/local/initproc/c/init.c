// legorl-sandbox-init: the local sandbox backend's spawner and sandbox init
// (package sandbox/local), in C: the sandbox's security boundary, which
// exists only here.
//
// The host (any binary that links sandbox/local) starts this program once,
// as its spawner, when it finds it beside its own executable (or where
// Options.InitPath says) and the program greets it with the host's init
// version. For every sandbox the spawner forks a holder into new user,
// mount, pid, network, UTS and IPC namespaces; the holder, pid 1 of the
// sandbox, builds the root file system, drops privileges, installs the
// seccomp filter and runs the host's commands one at a time. A fork of
// this small static process and no exec: cheaper per sandbox than any
// init with a language runtime to start (docs/ARCHITECTURE.md).
//
// The protocol is package initproc's (proto_linux.go); the message numbers,
// limits and the sandbox's fixed tables come from tables.h, which go
// generate writes from initproc/tables_linux.go. A request this program
// cannot read (malformed, truncated, over MAX_MSG) or does not expect
// gets a fault message naming the problem, and the program exits.
//
// Build (make build does, with the version scripts/lib/build-init.sh
// computes: the SHA-256 of this file and tables.h, as initproc.Version):
//
//	cc -static -O2 -Wall -Wextra -Werror -DLEGORL_INIT_VERSION='"<version>"' -o bin/legorl-sandbox-init init.c
//
// `legorl-sandbox-init --seccomp-filter` prints the filter, one BPF
// instruction per line ("code jt jf k"), which the host's tests run against
// initproc.DeniedSyscalls; `--version` prints the version. Run by hand
// otherwise, it says what it is for and exits 2.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "tables.h"

#ifndef LEGORL_INIT_VERSION
#error "build with -DLEGORL_INIT_VERSION='\"...\"', initproc.Version (scripts/lib/build-init.sh does)"
#endif

#if defined(__x86_64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_AARCH64
#else
#error "no seccomp filter for this architecture"
#endif

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

enum {
	CTL_FD = 3, // the holder's control socket, and the spawner's
};

// ---- errors ----------------------------------------------------------------

// err holds the last error's text; a function that fails returns -1 and
// sets it. The program is single-threaded.
static char err[1024];

static int failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int failf(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, sizeof err, fmt, ap);
	va_end(ap);
	return -1;
}

// errstr is strerror in Go's spelling (lower-case first letter), so that
// the host's messages and the init's read alike.
static const char *errstr(int e) {
	static char buf[128];
	snprintf(buf, sizeof buf, "%s", strerror(e));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z')) buf[0] += 'a' - 'A';
	return buf;
}

// ---- the protocol (initproc/proto_linux.go) --------------------------------

struct strs {
	size_t n;
	char **v; // n strings, then NULL: ready for execve
};

struct mount_entry {
	char *target;
	int ro;
};

struct msg {
	int op; // enum op, or a number the protocol lacks
	int has_setup;
	char *workspace;
	size_t nmounts;
	struct mount_entry *mounts;
	int64_t tmp_bytes, nproc;
	int seccomp;
	struct strs args, env;
	char *dir;
	int64_t uid, pid;
	char *version, *error;
	uint64_t status;
	int not_found, tmp_full;
};

static void strs_free(struct strs *s) {
	for (size_t i = 0; i < s->n; i++) free(s->v[i]);
	free(s->v);
}

static void msg_free(struct msg *m) {
	free(m->workspace);
	for (size_t i = 0; i < m->nmounts; i++) free(m->mounts[i].target);
	free(m->mounts);
	strs_free(&m->args);
	strs_free(&m->env);
	free(m->dir);
	free(m->version);
	free(m->error);
	memset(m, 0, sizeof *m);
}

static void *xcalloc(size_t n, size_t size) {
	void *p = calloc(n ? n : 1, size);
	if (!p) {
		fprintf(stderr, "legorl sandbox init: out of memory\n");
		_exit(1);
	}
	return p;
}

// dec reads what initproc's encode wrote; after the first error (bad)
// every read returns the zero value.
struct dec {
	const uint8_t *b;
	size_t n;
	int bad;
};

static void dec_fail(struct dec *d) {
	d->bad = 1;
	d->n = 0;
}

// uvarint is binary.Uvarint, refusing what initproc's decoder refuses: a
// short or overlong varint and one longer than it need be.
static uint64_t dec_uvarint(struct dec *d) {
	uint64_t v = 0;
	unsigned shift = 0;
	for (size_t i = 0; i < d->n; i++) {
		if (i == 10) break;
		uint8_t c = d->b[i];
		if (c < 0x80) {
			if (i == 9 && c > 1) break;
			if (i > 0 && c == 0) break;
			v |= (uint64_t)c << shift;
			d->b += i + 1;
			d->n -= i + 1;
			return v;
		}
		v |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
	}
	dec_fail(d);
	return 0;
}

static int64_t dec_varint(struct dec *d) {
	uint64_t u = dec_uvarint(d);
	int64_t x = (int64_t)(u >> 1);
	return (u & 1) ? ~x : x;
}

static int dec_bool(struct dec *d) {
	if (d->n == 0 || d->b[0] > 1) {
		dec_fail(d);
		return 0;
	}
	int v = d->b[0];
	d->b++;
	d->n--;
	return v;
}

static size_t dec_count(struct dec *d) {
	uint64_t n = dec_uvarint(d);
	if (n > d->n) {
		dec_fail(d);
		return 0;
	}
	return (size_t)n;
}

static char *dec_str(struct dec *d) {
	size_t n = dec_count(d);
	char *s = xcalloc(n + 1, 1);
	memcpy(s, d->b, n);
	d->b += n;
	d->n -= n;
	return s;
}

static struct strs dec_strs(struct dec *d) {
	struct strs s = {0};
	s.n = dec_count(d);
	s.v = xcalloc(s.n + 1, sizeof *s.v);
	for (size_t i = 0; i < s.n; i++) s.v[i] = dec_str(d);
	return s;
}

static int decode(const uint8_t *b, size_t n, struct msg *m) {
	struct dec d = {b, n, 0};
	memset(m, 0, sizeof *m);
	uint64_t op = dec_uvarint(&d);
	if (op > 255) dec_fail(&d); // initproc's decoder refuses it too
	m->op = (int)op;
	if ((m->has_setup = dec_bool(&d))) {
		m->workspace = dec_str(&d);
		m->nmounts = dec_count(&d);
		m->mounts = xcalloc(m->nmounts, sizeof *m->mounts);
		for (size_t i = 0; i < m->nmounts; i++) {
			m->mounts[i].target = dec_str(&d);
			m->mounts[i].ro = dec_bool(&d);
		}
		m->tmp_bytes = dec_varint(&d);
		m->nproc = dec_varint(&d);
		m->seccomp = dec_bool(&d);
	}
	m->args = dec_strs(&d);
	m->dir = dec_str(&d);
	m->env = dec_strs(&d);
	m->uid = dec_varint(&d);
	m->pid = dec_varint(&d);
	m->version = dec_str(&d);
	m->error = dec_str(&d);
	m->status = dec_uvarint(&d);
	m->not_found = dec_bool(&d);
	m->tmp_full = dec_bool(&d);
	if (d.bad || d.n > 0) {
		msg_free(m);
		return -1;
	}
	return 0;
}

struct enc {
	uint8_t b[4096 + 64];
	size_t n;
};

static void enc_uvarint(struct enc *e, uint64_t v) {
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)v | 0x80;
		v >>= 7;
	}
	e->b[e->n++] = (uint8_t)v;
}

static void enc_varint(struct enc *e, int64_t v) {
	uint64_t u = (uint64_t)v << 1;
	if (v < 0) u = ~u;
	enc_uvarint(e, u);
}

static void enc_bool(struct enc *e, int v) { e->b[e->n++] = v ? 1 : 0; }

// enc_str writes s, cut to 4,000 bytes (only error texts are long).
static void enc_str(struct enc *e, const char *s) {
	size_t n = strlen(s);
	if (n > 4000) n = 4000;
	enc_uvarint(e, n);
	memcpy(e->b + e->n, s, n);
	e->n += n;
}

// reply is what this side sends: hello, spawned, prepared, ready, exited.
struct reply {
	enum op op;
	const char *version, *error;
	int64_t pid;
	uint64_t status;
	int not_found, tmp_full;
};

static int send_reply(int fd, const struct reply *r, const int *fds, int nfds) {
	struct enc e = {.n = 0};
	enc_uvarint(&e, r->op);
	enc_bool(&e, 0);     // Setup
	enc_uvarint(&e, 0);  // Args
	enc_str(&e, "");     // Dir
	enc_uvarint(&e, 0);  // Env
	enc_varint(&e, 0);   // UID
	enc_varint(&e, r->pid);
	enc_str(&e, r->version ? r->version : "");
	enc_str(&e, r->error ? r->error : "");
	enc_uvarint(&e, r->status);
	enc_bool(&e, r->not_found);
	enc_bool(&e, r->tmp_full);

	struct iovec iov = {e.b, e.n};
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} oob;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		mh.msg_control = oob.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n;
	do n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) return failf("send %s: %s", op_names[r->op], errstr(errno));
	return 0;
}

static void close_all(const int *fds, int n) {
	for (int i = 0; i < n; i++) close(fds[i]);
}

// close_received closes the descriptors that came with mh.
static void close_received(struct msghdr *mh) {
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

// op_name names an op for an error text.
static const char *op_name(int op) {
	static char buf[32];
	if (op > 0 && op < OP_END) return op_names[op];
	snprintf(buf, sizeof buf, "unknown op %d", op);
	return buf;
}

// fault tells the host why this program is about to exit (err: the
// request it could not read or serve), best effort; it returns -1.
static int send_reply(int fd, const struct reply *r, const int *fds, int nfds);
static int fault(void) {
	char e[sizeof err];
	snprintf(e, sizeof e, "%s", err);
	struct reply x = {.op = OP_FAULT, .error = e};
	send_reply(CTL_FD, &x, NULL, 0);
	snprintf(err, sizeof err, "%s", e);
	return -1;
}

enum { RECV_OK = 0, RECV_CLOSED = 1, RECV_ERR = -1 };

// recv_msg reads one message and the descriptors that came with it
// (close-on-exec set), as initproc.Recv.
static int recv_msg(int fd, struct msg *m, int *fds, int *nfds) {
	*nfds = 0;
	char one;
	struct iovec iov = {&one, 1};
	struct msghdr peek = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t size;
	do size = recvmsg(fd, &peek, MSG_PEEK | MSG_TRUNC);
	while (size < 0 && errno == EINTR);
	if (size < 0) return failf("receive: %s", errstr(errno));
	if (size > MAX_MSG) {
		// Take the packet off the socket (and close what came with it),
		// unread: it is refused whatever it says.
		union {
			char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
			struct cmsghdr align;
		} oob;
		struct msghdr drop = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = oob.buf, .msg_controllen = sizeof oob.buf};
		ssize_t n;
		do n = recvmsg(fd, &drop, MSG_CMSG_CLOEXEC | MSG_TRUNC);
		while (n < 0 && errno == EINTR);
		if (n >= 0) close_received(&drop);
		return failf("receive: a message of %zd bytes, over the limit of %d", size, MAX_MSG);
	}
	uint8_t *buf = xcalloc(size > 0 ? size : 1, 1);
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} oob;
	iov = (struct iovec){buf, size > 0 ? size : 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = oob.buf, .msg_controllen = sizeof oob.buf};
	ssize_t n;
	do n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		free(buf);
		return failf("receive: %s", errstr(errno));
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && *nfds < MAX_FDS; i++) memcpy(&fds[(*nfds)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (mh.msg_flags & MSG_TRUNC) {
		free(buf);
		close_all(fds, *nfds);
		*nfds = 0;
		return failf("receive: a message over the limit of %d bytes", MAX_MSG);
	}
	if (n == 0) {
		free(buf);
		close_all(fds, *nfds);
		*nfds = 0;
		return RECV_CLOSED;
	}
	int bad = decode(buf, n, m);
	free(buf);
	if (bad) {
		close_all(fds, *nfds);
		*nfds = 0;
		return failf("receive: malformed message");
	}
	return RECV_OK;
}

// cloexec_from marks every descriptor from fd up close-on-exec.
static int cloexec_from(int fd) {
	if (syscall(SYS_close_range, (unsigned)fd, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return failf("close-on-exec from descriptor %d: %s", fd, errstr(errno));
	return 0;
}

// ---- the root file system ---------------------------------------------------

// The tables (system_paths, masked_files, fixed_mounts, devices,
// dev_links) are tables.h's.
#define NEW_ROOT "/tmp"

// r is NEW_ROOT joined with the absolute path p.
static const char *r(const char *p) {
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s%s", NEW_ROOT, p);
	return buf;
}

static int mount_or_fail(const char *src, const char *dst, const char *type, unsigned long flags, const char *data,
			 const char *what) {
	if (mount(src, dst, type, flags, data) < 0) return failf("%s: %s", what, errstr(errno));
	return 0;
}

// mkdir_all is os.MkdirAll.
static int mkdir_all(const char *path, mode_t mode) {
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) return 0;
		return failf("mkdir %s: %s", path, errstr(ENOTDIR));
	}
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return failf("mkdir %s: %s", path, errstr(ENAMETOOLONG));
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/') continue;
		*p = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST) return failf("mkdir %s: %s", buf, errstr(errno));
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST) return failf("mkdir %s: %s", buf, errstr(errno));
	return 0;
}

// write_empty is os.WriteFile(path, nil, mode).
static int write_empty(const char *path, mode_t mode) {
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) return failf("open %s: %s", path, errstr(errno));
	close(fd);
	return 0;
}

static int remount_ro(const char *dst, unsigned long flags) {
	if (mount("", dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL) < 0)
		return failf("remount %s read-only: %s", dst, errstr(errno));
	return 0;
}

// restrict_mount remounts the mount at dst nosuid and nodev, and read-only
// when ro: the last step of bind_dir and attach.
static int restrict_mount(const char *dst, int ro) {
	unsigned long flags = MS_NOSUID | MS_NODEV;
	if (ro) return remount_ro(dst, flags);
	if (mount("", dst, NULL, MS_REMOUNT | MS_BIND | flags, NULL) < 0) return failf("remount %s: %s", dst, errstr(errno));
	return 0;
}

static int bind_dir(const char *src, const char *dst, int ro) {
	if (mkdir_all(dst, 0755) < 0) return -1;
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0) return failf("bind %s: %s", dst, errstr(errno));
	return restrict_mount(dst, ro);
}

static int loopback_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) return failf("loopback: %s", errstr(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	int rc = 0;
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		rc = failf("loopback flags: %s", errstr(errno));
	} else {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) rc = failf("loopback up: %s", errstr(errno));
	}
	close(s);
	return rc;
}

static int prepare_root(void) {
	if (mount_or_fail("", "/", NULL, MS_REC | MS_PRIVATE, NULL, "make mounts private") < 0) return -1;
	if (sethostname(SANDBOX_HOSTNAME, strlen(SANDBOX_HOSTNAME)) < 0) return failf("hostname: %s", errstr(errno));
	if (mount_or_fail("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m", "root tmpfs") < 0) return -1;
	for (size_t i = 0; i < sizeof system_paths / sizeof *system_paths; i++) {
		const char *p = system_paths[i];
		struct stat st;
		if (lstat(p, &st) < 0) continue;
		if (S_ISLNK(st.st_mode)) {
			char dest[4096];
			ssize_t n = readlink(p, dest, sizeof dest - 1);
			if (n < 0) return failf("readlink %s: %s", p, errstr(errno));
			dest[n] = 0;
			if (symlink(dest, r(p)) < 0) return failf("symlink %s: %s", r(p), errstr(errno));
			continue;
		}
		if (!S_ISDIR(st.st_mode)) continue;
		char dst[4096];
		snprintf(dst, sizeof dst, "%s", r(p));
		if (bind_dir(p, dst, 1) < 0) return -1;
	}
	char empty[4096];
	snprintf(empty, sizeof empty, "%s", r("/.empty"));
	if (write_empty(empty, 0444) < 0) return -1;
	for (size_t i = 0; i < sizeof masked_files / sizeof *masked_files; i++) {
		struct stat st;
		char dst[4096];
		snprintf(dst, sizeof dst, "%s", r(masked_files[i]));
		if (lstat(dst, &st) < 0) continue;
		if (mount(empty, dst, NULL, MS_BIND, NULL) < 0) return failf("mask %s: %s", masked_files[i], errstr(errno));
	}
	// The sandbox's own file systems: its /proc (of its own pid namespace),
	// a minimal /dev, /dev/shm and /tmp (sized by setup_sandbox).
	for (size_t i = 0; i < sizeof fixed_mounts / sizeof *fixed_mounts; i++) {
		const struct fixed_mount *m = &fixed_mounts[i];
		char dst[4096];
		snprintf(dst, sizeof dst, "%s", r(m->target));
		if (mkdir(dst, m->mode) < 0) return failf("mkdir %s: %s", m->target, errstr(errno));
		if (mount(m->fstype, dst, m->fstype, m->flags, m->data) < 0)
			return failf("mount %s: %s", m->target, errstr(errno));
	}
	// A few host device nodes, no tty, no disks; then /dev turns read-only.
	for (size_t i = 0; i < sizeof devices / sizeof *devices; i++) {
		char src[64], dst[4096];
		snprintf(src, sizeof src, "/dev/%s", devices[i]);
		snprintf(dst, sizeof dst, "%s", r(src));
		if (write_empty(dst, 0666) < 0) return -1;
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0) return failf("bind %s: %s", src, errstr(errno));
	}
	for (size_t i = 0; i < sizeof dev_links / sizeof *dev_links; i++)
		if (symlink(dev_links[i][1], r(dev_links[i][0])) < 0) return failf("symlink %s: %s", dev_links[i][0], errstr(errno));
	if (remount_ro(r("/dev"), MS_NOSUID | MS_NOEXEC) < 0) return -1;
	// Enter the new root and drop the old one.
	if (chdir(NEW_ROOT) < 0) return failf("chdir %s: %s", NEW_ROOT, errstr(errno));
	if (syscall(SYS_pivot_root, ".", ".") < 0) return failf("pivot_root: %s", errstr(errno));
	if (umount2(".", MNT_DETACH) < 0) return failf("detach old root: %s", errstr(errno));
	if (chdir("/") < 0) return failf("chdir /: %s", errstr(errno));
	return loopback_up();
}

// ---- privileges --------------------------------------------------------------

static int drop_privileges(void) {
	struct rlimit zero = {0, 0};
	if (setrlimit(RLIMIT_CORE, &zero) < 0) return failf("rlimit core: %s", errstr(errno));
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) return failf("not dumpable: %s", errstr(errno));
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (!f) return failf("open /proc/sys/kernel/cap_last_cap: %s", errstr(errno));
	int last = -1;
	int got = fscanf(f, "%d", &last);
	fclose(f);
	if (got != 1 || last < 0 || last > 1000) return failf("cap_last_cap: unreadable");
	for (int c = 0; c <= last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) return failf("drop capability %d: %s", c, errstr(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return failf("clear ambient capabilities: %s", errstr(errno));
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0) return failf("capget: %s", errstr(errno));
	data[0].inheritable = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0) return failf("capset: %s", errstr(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return failf("no_new_privs: %s", errstr(errno));
	return 0;
}

// ---- the seccomp filter (initproc.DeniedSyscalls) ---------------------------

// denied_syscalls (tables.h) answer EPERM whatever their arguments.

enum { L_NONE, L_IOCTL, L_FLAGS, L_EPERM, L_ENOSYS, L_KILL, L_COUNT };

// asm is a tiny BPF assembler with forward jumps to labels.
struct bpf_asm {
	struct sock_filter ins[128];
	int n;
	int label[L_COUNT];
	struct {
		int at, jt, jf;
	} fix[128];
	int nfix;
};

static void emit(struct bpf_asm *a, uint16_t code, uint32_t k) { a->ins[a->n++] = (struct sock_filter){code, 0, 0, k}; }

static void jump(struct bpf_asm *a, uint16_t code, uint32_t k, int jt, int jf) {
	a->fix[a->nfix].at = a->n;
	a->fix[a->nfix].jt = jt;
	a->fix[a->nfix].jf = jf;
	a->nfix++;
	emit(a, code, k);
}

static void label(struct bpf_asm *a, int l) { a->label[l] = a->n; }

static int assemble(struct bpf_asm *a) {
	for (int i = 0; i < a->nfix; i++) {
		int at = a->fix[i].at, ls[2] = {a->fix[i].jt, a->fix[i].jf};
		for (int j = 0; j < 2; j++) {
			if (ls[j] == L_NONE) continue;
			int to = a->label[ls[j]];
			if (to <= at || to - at - 1 > 255) return failf("seccomp: bad jump to label %d", ls[j]);
			if (j == 0) a->ins[at].jt = to - at - 1;
			else a->ins[at].jf = to - at - 1;
		}
	}
	return 0;
}

#define LD_W (BPF_LD | BPF_W | BPF_ABS)
#define JEQ (BPF_JMP | BPF_JEQ | BPF_K)
#define JGE (BPF_JMP | BPF_JGE | BPF_K)
#define JSET (BPF_JMP | BPF_JSET | BPF_K)
#define RET (BPF_RET | BPF_K)
enum { OFF_NR = 0, OFF_ARCH = 4, OFF_ARG0 = 16, OFF_ARG1 = 24 };

static int seccomp_filter(struct bpf_asm *a) {
	memset(a, 0, sizeof *a);
	emit(a, LD_W, OFF_ARCH);
	jump(a, JEQ, AUDIT_ARCH_NATIVE, L_NONE, L_KILL);
	emit(a, LD_W, OFF_NR);
#if defined(__x86_64__)
	jump(a, JGE, 0x40000000, L_EPERM, L_NONE); // the x32 ABI
#endif
	for (size_t i = 0; i < sizeof denied_syscalls / sizeof *denied_syscalls; i++)
		jump(a, JEQ, denied_syscalls[i], L_EPERM, L_NONE);
	jump(a, JEQ, __NR_clone3, L_ENOSYS, L_NONE);
	jump(a, JEQ, __NR_ioctl, L_IOCTL, L_NONE);
	jump(a, JEQ, __NR_clone, L_FLAGS, L_NONE);
	jump(a, JEQ, __NR_unshare, L_FLAGS, L_NONE);
	emit(a, RET, SECCOMP_RET_ALLOW);

	label(a, L_IOCTL);
	emit(a, LD_W, OFF_ARG1);
	jump(a, JEQ, TIOCSTI, L_EPERM, L_NONE);
	jump(a, JEQ, TIOCLINUX, L_EPERM, L_NONE);
	emit(a, RET, SECCOMP_RET_ALLOW);

	label(a, L_FLAGS); // clone and unshare: no new user namespace
	emit(a, LD_W, OFF_ARG0);
	jump(a, JSET, CLONE_NEWUSER, L_EPERM, L_NONE);
	emit(a, RET, SECCOMP_RET_ALLOW);

	label(a, L_EPERM);
	emit(a, RET, SECCOMP_RET_ERRNO | EPERM);
	label(a, L_ENOSYS);
	emit(a, RET, SECCOMP_RET_ERRNO | ENOSYS);
	label(a, L_KILL);
	emit(a, RET, SECCOMP_RET_KILL_PROCESS);
	return assemble(a);
}

static int install_seccomp(struct bpf_asm *a) {
	struct sock_fprog prog = {(unsigned short)a->n, a->ins};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return failf("seccomp: %s", errstr(errno));
	return 0;
}

// ---- the holder --------------------------------------------------------------

static struct bpf_asm filter;

static int prepare(void) {
	if (prepare_root() < 0 || drop_privileges() < 0) return -1;
	return seccomp_filter(&filter);
}

// attach moves the detached mount fd to dst (made first: a folder, or an
// empty file when the mount is a file), read-only when ro.
static int attach(int fd, const char *dst, int ro) {
	struct stat st;
	if (fstat(fd, &st) < 0) return failf("fstat: %s", errstr(errno));
	if (S_ISDIR(st.st_mode)) {
		if (mkdir_all(dst, 0755) < 0) return -1;
	} else {
		char dir[4096];
		snprintf(dir, sizeof dir, "%s", dst);
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir) *slash = 0;
		else snprintf(dir, sizeof dir, "%s", slash ? "/" : ".");
		if (mkdir_all(dir, 0755) < 0) return -1;
		if (write_empty(dst, 0644) < 0) return -1;
	}
	if (syscall(SYS_move_mount, fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return failf("attach %s: %s", dst, errstr(errno));
	return restrict_mount(dst, ro);
}

static int setup_sandbox(const struct msg *cfg, const int *fds) {
	if (attach(fds[0], cfg->workspace, 0) < 0) {
		char e[sizeof err];
		snprintf(e, sizeof e, "%s", err);
		return failf("workspace: %s", e);
	}
	for (size_t i = 0; i < cfg->nmounts; i++) {
		if (attach(fds[1 + i], cfg->mounts[i].target, cfg->mounts[i].ro) < 0) {
			char e[sizeof err];
			snprintf(e, sizeof e, "%s", err);
			return failf("mount %s: %s", cfg->mounts[i].target, e);
		}
	}
	char size[64];
	snprintf(size, sizeof size, "size=%lld", (long long)cfg->tmp_bytes);
	static const char *const tmps[] = {"/tmp", "/dev/shm"};
	for (int i = 0; i < 2; i++)
		if (mount("", tmps[i], NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, size) < 0)
			return failf("size of %s: %s", tmps[i], errstr(errno));
	if (remount_ro("/", MS_NOSUID | MS_NODEV) < 0) return -1;
	if (cfg->nproc > 0) {
		// Counted per user and user namespace: this sandbox's tasks only.
		struct rlimit n = {(rlim_t)cfg->nproc, (rlim_t)cfg->nproc};
		if (setrlimit(RLIMIT_NPROC, &n) < 0) return failf("rlimit nproc: %s", errstr(errno));
	}
	if (cfg->seccomp) return install_seccomp(&filter);
	return 0;
}

// look_path finds a program in the PATH of env, as execvp would
// (Go's exec.LookPath): the last PATH wins, an empty entry is ".".
static int look_path(const char *file, char *const *env, char *out, size_t outlen) {
	if (strchr(file, '/')) {
		snprintf(out, outlen, "%s", file);
		return 0;
	}
	const char *path = "";
	for (char *const *kv = env; *kv; kv++)
		if (strncmp(*kv, "PATH=", 5) == 0) path = *kv + 5;
	const char *p = path;
	for (;;) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == 0) snprintf(out, outlen, "%s", file);
		else snprintf(out, outlen, "%.*s/%s", (int)n, p, file);
		struct stat st;
		if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & 0111)) return 0;
		if (!end) break;
		p = end + 1;
	}
	return failf("%s: executable file not found in $PATH", file);
}

// start_command forks the command in a new session (no controlling
// terminal), its standard descriptors fds; it returns its pid and a pidfd
// for it, or -1 with *not_found set when the program does not exist.
static pid_t start_command(const struct msg *m, const int *fds, int *pidfd, int *not_found) {
	*not_found = 0;
	if (m->args.n == 0) return failf("no command");
	char path[4096];
	if (look_path(m->args.v[0], m->env.v, path, sizeof path) < 0) {
		*not_found = 1;
		return -1;
	}
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) return failf("%s: pipe: %s", m->args.v[0], errstr(errno));
	*pidfd = -1;
	pid_t pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, NULL);
	if (pid < 0) {
		int e = errno;
		close(ep[0]);
		close(ep[1]);
		return failf("%s: %s", m->args.v[0], errstr(e));
	}
	if (pid == 0) {
		// The child: no allocation, only system calls, then exec.
		int e = 0;
		if (setsid() < 0) e = errno;
		int tmp[3];
		for (int i = 0; i < 3 && !e; i++)
			if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0) e = errno;
		for (int i = 0; i < 3 && !e; i++)
			if (dup2(tmp[i], i) < 0) e = errno;
		if (!e && m->dir[0] && chdir(m->dir) < 0) e = errno;
		if (!e) {
			execve(path, m->args.v, m->env.v);
			e = errno;
		}
		while (write(ep[1], &e, sizeof e) < 0 && errno == EINTR) {
		}
		_exit(127);
	}
	close(ep[1]);
	int e = 0;
	ssize_t n;
	do n = read(ep[0], &e, sizeof e);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == sizeof e) {
		// The child did not exec: reap it and report why.
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
		}
		close(*pidfd);
		*not_found = e == ENOENT;
		return failf("%s: %s", m->args.v[0], errstr(e));
	}
	return pid;
}

// await waits for the command of pidfd to exit, meanwhile killing every
// process of the sandbox when the host asks; it returns 1 when the host
// went away instead (RECV_CLOSED), or -1 when it sent what this program
// cannot read or does not expect (err says what). It closes pidfd.
static int await_exit(int pidfd) {
	struct pollfd p[2] = {{pidfd, POLLIN, 0}, {CTL_FD, POLLIN, 0}};
	int rc = 0;
	for (;;) {
		p[0].revents = p[1].revents = 0;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR) continue;
			rc = failf("poll: %s", errstr(errno));
			break;
		}
		if (p[0].revents) break;
		if (p[1].revents) {
			struct msg k;
			int kfds[MAX_FDS], nk;
			rc = recv_msg(CTL_FD, &k, kfds, &nk);
			if (rc != RECV_OK) break;
			close_all(kfds, nk);
			int op = k.op;
			msg_free(&k);
			if (op != OP_KILL) {
				rc = failf("protocol: %s while a command runs", op_name(op));
				break;
			}
			kill(-1, SIGKILL);
		}
	}
	close(pidfd);
	return rc;
}

// reap waits for the command; once it ends, it kills every other process
// in the sandbox (background children, setsid'd daemons) and reaps them.
static void reap(pid_t pid, struct reply *out, char *errtext, size_t errlen) {
	for (;;) {
		int st;
		pid_t p = wait4(-1, &st, 0, NULL);
		if (p < 0 && errno == EINTR) continue;
		if (p < 0) {
			snprintf(errtext, errlen, "wait: %s", errstr(errno));
			out->error = errtext;
			return;
		}
		if (p == pid) {
			out->status = (uint32_t)st;
			break;
		}
	}
	// kill(-1) from pid 1 reaches every other process of the namespace.
	for (;;) {
		kill(-1, SIGKILL);
		pid_t p = wait4(-1, NULL, WNOHANG, NULL);
		if (p < 0 && errno == EINTR) continue;
		if (p < 0) return; // ECHILD: nothing left
		if (p == 0) usleep(100);
	}
}

static int tmp_full(void) {
	struct statfs st;
	if (statfs("/tmp", &st) < 0) return 0;
	return st.f_bavail == 0;
}

// serve runs the host's commands one at a time until the host goes away;
// a request it cannot read or does not expect ends it with a fault.
static int serve(void) {
	for (;;) {
		struct msg m;
		int fds[MAX_FDS], nfds;
		int rc = recv_msg(CTL_FD, &m, fds, &nfds);
		if (rc == RECV_CLOSED) return 0;
		if (rc != RECV_OK) return fault();
		if (m.op == OP_KILL) {
			close_all(fds, nfds); // nothing is running
		} else if (m.op == OP_EXEC) {
			if (nfds != 3) {
				close_all(fds, nfds);
				msg_free(&m);
				failf("protocol: exec with %d descriptors, want 3", nfds);
				return fault();
			}
			int pidfd, not_found;
			pid_t pid = start_command(&m, fds, &pidfd, &not_found);
			close_all(fds, nfds);
			msg_free(&m);
			if (pid < 0) {
				struct reply x = {.op = OP_EXITED, .error = err, .not_found = not_found};
				if (send_reply(CTL_FD, &x, NULL, 0) < 0) return -1;
				continue;
			}
			rc = await_exit(pidfd);
			if (rc != RECV_OK) {
				kill(-1, SIGKILL);
				return rc == RECV_CLOSED ? 0 : fault();
			}
			char errtext[256];
			struct reply x = {.op = OP_EXITED};
			reap(pid, &x, errtext, sizeof errtext);
			x.tmp_full = tmp_full();
			if (send_reply(CTL_FD, &x, NULL, 0) < 0) return -1;
			continue;
		} else {
			close_all(fds, nfds);
			int op = m.op;
			msg_free(&m);
			failf("protocol: %s, want exec or kill", op_name(op));
			return fault();
		}
		msg_free(&m);
	}
}

static int holder_main(void) {
	// No descriptor the holder inherited reaches a command: not its control
	// socket to the host (a command could answer for the holder on it).
	if (cloexec_from(CTL_FD) < 0) return -1;
	// Phase 1, before the host has asked for anything (a prestarted holder
	// waits here): build everything that does not depend on the spec, and
	// drop what privileges the rest of the setup does not need.
	if (prepare() < 0) {
		struct reply x = {.op = OP_PREPARED, .error = err};
		char e[sizeof err];
		snprintf(e, sizeof e, "%s", err);
		send_reply(CTL_FD, &x, NULL, 0);
		snprintf(err, sizeof err, "%s", e);
		return -1;
	}
	struct reply prepared = {.op = OP_PREPARED};
	if (send_reply(CTL_FD, &prepared, NULL, 0) < 0) return -1;
	// Phase 2: the spec's workspace, mounts and limits; then seal.
	struct msg m;
	int fds[MAX_FDS], nfds;
	int rc = recv_msg(CTL_FD, &m, fds, &nfds);
	if (rc == RECV_CLOSED) return failf("receive: peer closed the control socket");
	if (rc != RECV_OK) return fault();
	if (m.op != OP_SETUP || !m.has_setup || (size_t)nfds != 1 + m.nmounts) {
		close_all(fds, nfds);
		int op = m.op;
		size_t want = 1 + m.nmounts;
		msg_free(&m);
		if (op != OP_SETUP) failf("protocol: %s, want setup", op_name(op));
		else failf("protocol: setup with %d descriptors, want %zu", nfds, want);
		return fault();
	}
	rc = setup_sandbox(&m, fds);
	close_all(fds, nfds);
	msg_free(&m);
	struct reply ready = {.op = OP_READY, .error = rc < 0 ? err : ""};
	if (rc < 0) {
		char e[sizeof err];
		snprintf(e, sizeof e, "%s", err);
		send_reply(CTL_FD, &ready, NULL, 0);
		snprintf(err, sizeof err, "%s", e);
		return -1;
	}
	if (send_reply(CTL_FD, &ready, NULL, 0) < 0) return -1;
	return serve();
}

// ---- the spawner -------------------------------------------------------------

static int write_file(pid_t pid, const char *name, const char *text) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) return failf("open %s: %s", path, errstr(errno));
	ssize_t n = write(fd, text, strlen(text));
	int e = errno;
	close(fd);
	if (n != (ssize_t)strlen(text)) return failf("write %s: %s", path, errstr(n < 0 ? e : EIO));
	return 0;
}

// holder_child runs in the new namespaces: the spawn request's files
// become descriptors 3, 4, ... and nothing else stays open above 2; it
// becomes the namespace's root (host uid uid) and serves the host.
static void holder_child(int sync, const int *fds, int nfds) {
	char c;
	ssize_t n;
	do n = read(sync, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1) _exit(1); // the spawner failed to map the uid
	int tmp[MAX_FDS];
	for (int i = 0; i < nfds; i++)
		if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3 + nfds)) < 0) _exit(1);
	for (int i = 0; i < nfds; i++)
		if (dup2(tmp[i], 3 + i) < 0) _exit(1);
	if (syscall(SYS_close_range, 3 + nfds, ~0U, 0) < 0) _exit(1);
	signal(SIGCHLD, SIG_DFL); // the spawner's is ignored; the holder reaps its commands
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int rc = -1;
	if (setsid() < 0) failf("setsid: %s", errstr(errno));
	else if (setresgid(0, 0, 0) < 0) failf("setgid: %s", errstr(errno));
	else if (setresuid(0, 0, 0) < 0) failf("setuid: %s", errstr(errno));
	// After the uid change, which would clear it: the holder dies with the
	// spawner.
	else if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) failf("parent-death signal: %s", errstr(errno));
	else rc = holder_main();
	if (rc < 0) {
		fprintf(stderr, "legorl sandbox init: %s\n", err);
		_exit(1);
	}
	_exit(0);
}

// spawn_holder starts a holder in new namespaces, its root mapped to uid.
static pid_t spawn_holder(int64_t uid, const int *fds, int nfds) {
	if (uid <= 0 || uid > 0xfffffffe) return failf("bad uid %lld", (long long)uid);
	int sync[2];
	if (pipe2(sync, O_CLOEXEC) < 0) return failf("pipe: %s", errstr(errno));
	pid_t pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |
					       CLONE_NEWIPC | SIGCHLD,
			    NULL, NULL, NULL, NULL);
	if (pid < 0) {
		int e = errno;
		close(sync[0]);
		close(sync[1]);
		return failf("clone: %s", errstr(e));
	}
	if (pid == 0) {
		close(sync[1]);
		holder_child(sync[0], fds, nfds);
	}
	close(sync[0]);
	char map[64];
	snprintf(map, sizeof map, "0 %lld 1\n", (long long)uid);
	if (write_file(pid, "uid_map", map) < 0 || write_file(pid, "setgroups", "deny") < 0 ||
	    write_file(pid, "gid_map", map) < 0) {
		kill(pid, SIGKILL); // the kernel reaps it
		close(sync[1]);
		return -1;
	}
	ssize_t n;
	do n = write(sync[1], "x", 1);
	while (n < 0 && errno == EINTR);
	close(sync[1]);
	if (n != 1) {
		kill(pid, SIGKILL);
		return failf("start holder: %s", errstr(errno));
	}
	return pid;
}

static int spawner_main(void) {
	// The kernel reaps the holders as they die: a holder is gone, not a
	// zombie, once the host sees it exit.
	signal(SIGCHLD, SIG_IGN);
	// The host's own descriptors stay out of the holders.
	if (cloexec_from(CTL_FD + 1) < 0) return -1;
	struct reply hello = {.op = OP_HELLO, .version = LEGORL_INIT_VERSION};
	if (send_reply(CTL_FD, &hello, NULL, 0) < 0) return -1;
	for (;;) {
		struct msg m;
		int fds[MAX_FDS], nfds;
		int rc = recv_msg(CTL_FD, &m, fds, &nfds);
		if (rc == RECV_CLOSED) return 0;
		if (rc != RECV_OK) return fault();
		if (m.op != OP_SPAWN || nfds == 0) {
			close_all(fds, nfds);
			int op = m.op;
			msg_free(&m);
			if (op != OP_SPAWN) failf("protocol: %s, want spawn", op_name(op));
			else failf("protocol: spawn without a control socket");
			return fault();
		}
		pid_t pid = spawn_holder(m.uid, fds, nfds);
		close_all(fds, nfds);
		msg_free(&m);
		if (pid < 0) {
			struct reply x = {.op = OP_SPAWNED, .error = err};
			if (send_reply(CTL_FD, &x, NULL, 0) < 0) return -1;
			continue;
		}
		int pidfd = syscall(SYS_pidfd_open, pid, 0);
		if (pidfd < 0) {
			kill(pid, SIGKILL);
			char e[256];
			snprintf(e, sizeof e, "pidfd: %s", errstr(errno));
			struct reply x = {.op = OP_SPAWNED, .error = e};
			if (send_reply(CTL_FD, &x, NULL, 0) < 0) return -1;
			continue;
		}
		struct reply x = {.op = OP_SPAWNED, .pid = pid};
		rc = send_reply(CTL_FD, &x, &pidfd, 1);
		close(pidfd);
		if (rc < 0) return -1;
	}
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--seccomp-filter") == 0) {
		if (seccomp_filter(&filter) < 0) {
			fprintf(stderr, "legorl-sandbox-init: %s\n", err);
			return 1;
		}
		for (int i = 0; i < filter.n; i++)
			printf("%u %u %u %u\n", filter.ins[i].code, filter.ins[i].jt, filter.ins[i].jf, filter.ins[i].k);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("%s\n", LEGORL_INIT_VERSION);
		return 0;
	}
	const char *mode = getenv(INIT_ENV);
	if (!mode || strcmp(mode, INIT_MODE_SPAWNER) != 0) {
		fprintf(stderr, "legorl-sandbox-init: started only by the local sandbox backend (package sandbox/local)\n");
		return 2;
	}
	unsetenv(INIT_ENV);
	if (spawner_main() < 0) {
		fprintf(stderr, "legorl sandbox init: %s\n", err);
		return 1;
	}
	return 0;
}
