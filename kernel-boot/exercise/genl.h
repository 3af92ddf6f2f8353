/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Raw generic netlink and interface helpers shared by the exercisers
 * wiphy_unregister.c and wpan_phy_unregister.c (no libnl in the guest).
 */
#ifndef EXERCISE_GENL_H
#define EXERCISE_GENL_H
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

struct msg {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[32768];
};

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("netlink");
		exit(2);
	}
	return fd;
}

static void msg_init(struct msg *m, int family, int cmd)
{
	memset(m, 0, sizeof(*m));
	m->n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	m->n.nlmsg_type = family;
	m->n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	m->g.cmd = cmd;
	m->g.version = 1;
}

static void put(struct msg *m, int type, const void *data, int len)
{
	struct nlattr *a = (struct nlattr *)((char *)m + NLMSG_ALIGN(m->n.nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	if (len)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	m->n.nlmsg_len = NLMSG_ALIGN(m->n.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void put_u32(struct msg *m, int type, uint32_t v)
{
	put(m, type, &v, 4);
}

static void put_str(struct msg *m, int type, const char *s)
{
	put(m, type, s, strlen(s) + 1);
}

/*
 * Send m, read until the ack.  Returns the ack's error field (0, -errno,
 * or a positive value such as hwsim's radio id); if reply is given, the
 * first non-ack message is copied there.
 */
static int talk(int fd, struct msg *m, struct msg *reply)
{
	static __thread char buf[32768];
	int seq = m->n.nlmsg_seq;

	if (send(fd, m, m->n.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		int len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (len < 0)
			return -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_seq != (unsigned int)seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
			if (reply && h->nlmsg_len <= sizeof(*reply))
				memcpy(reply, h, h->nlmsg_len);
		}
	}
}

static int family_id(int fd, const char *name)
{
	struct msg m, r;
	struct nlattr *a;
	int len;

	msg_init(&m, GENL_ID_CTRL, CTRL_CMD_GETFAMILY);
	put_str(&m, CTRL_ATTR_FAMILY_NAME, name);
	memset(&r, 0, sizeof(r));
	if (talk(fd, &m, &r) < 0 || r.n.nlmsg_len == 0)
		return -1;
	len = r.n.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	for (a = (struct nlattr *)r.buf; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN;
	     len -= NLA_ALIGN(a->nla_len), a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))
		if (a->nla_type == CTRL_ATTR_FAMILY_ID)
			return *(uint16_t *)((char *)a + NLA_HDRLEN);
	return -1;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int set_up(int fd, const char *ifname, int up)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	if (up)
		ifr.ifr_flags |= IFF_UP;
	else
		ifr.ifr_flags &= ~IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

static int is_up(int fd, const char *ifname)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return 0;
	return !!(ifr.ifr_flags & IFF_UP);
}

static int read_int(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

#endif
