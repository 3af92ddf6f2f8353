/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared by the exercisers wiphy_unregister.c and wpan_phy_unregister.c:
 * raw generic netlink helpers (no libnl in the guest) and the race that
 * makes a phy's unregistration find one of its interfaces open.
 *
 * The unregistration (ieee80211_unregister_hw(), ieee802154_unregister_hw())
 * first closes and unregisters every interface of the phy under RTNL, then
 * drops RTNL (rtnl_unlock() then runs netdev_run_todo(): RCU waits, freeing)
 * and only later reads opencount in wiphy_unregister()/wpan_phy_unregister().
 * The holder thread waits for the link event of an interface ("pre") of the
 * phy, up beforehand, going down: the removal is then under way with RTNL
 * held.  It at once asks for a new interface ("hold") on the same phy,
 * which blocks on RTNL and is created as soon as the removal drops it, and
 * brings it up (NETDEV_UP: opencount++).  If that happens before the
 * unregistration reads opencount, the unregistration waits; after WAIT_MS
 * the holder deletes the interface (its NETDEV_DOWN wakes dev_wait) and
 * times how long the removal stayed blocked.  Creating an interface on a
 * phy that is being unregistered is a race of its own: if the new interface
 * comes too late, the phy is unregistered under it (the caller reports it).
 */
#ifndef EXERCISE_UNREG_RACE_H
#define EXERCISE_UNREG_RACE_H
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

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

/*
 * A one-shot request of a family's NEW_INTERFACE/DEL_INTERFACE style:
 * u32 id (phy or ifindex), then, if name_attr, the name and u32 type.
 * Returns 0 or -errno.
 */
static int genl_iface(int family, int cmd, int id_attr, uint32_t id,
		      int name_attr, const char *name, int type_attr, uint32_t type)
{
	int fd = nl_open();
	struct msg m;
	int err;

	msg_init(&m, family, cmd);
	m.n.nlmsg_seq = 1;
	put_u32(&m, id_attr, id);
	if (name_attr) {
		put_str(&m, name_attr, name);
		put_u32(&m, type_attr, type);
	}
	err = talk(fd, &m, NULL);
	close(fd);
	return err;
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

/* IFF_UP on name: 0 or -errno */
static int bring_up(const char *name)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int err = set_up(fd, name, 1);

	close(fd);
	return err;
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

/* a NETLINK_ROUTE socket that receives link events (5 s receive timeout) */
static int link_events(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	struct timeval tv = { .tv_sec = 5 };

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("rtnetlink");
		exit(2);
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/*
 * Read link events until name goes down (RTM_NEWLINK without IFF_UP) or
 * away (RTM_DELLINK): 0, or -errno.
 */
static int wait_down(int fd, const char *name)
{
	static char buf[32768];

	for (;;) {
		int len = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (len < 0)
			return -errno;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			struct ifinfomsg *ifi = NLMSG_DATA(h);
			int alen = IFLA_PAYLOAD(h);
			struct rtattr *a;

			if (h->nlmsg_type != RTM_DELLINK &&
			    !(h->nlmsg_type == RTM_NEWLINK && !(ifi->ifi_flags & IFF_UP)))
				continue;
			for (a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
				if (a->rta_type == IFLA_IFNAME && !strcmp(RTA_DATA(a), name))
					return 0;
		}
	}
}

#define WAIT_MS 1500

struct race {
	/* set by the caller */
	int (*create)(const char *name);	/* 0 or -errno */
	int (*destroy)(const char *name);
	char pre[IFNAMSIZ], hold[IFNAMSIZ];
	int events;			/* link_events(), opened once pre is up */
	/* the removal, in the caller's thread */
	volatile int removed;
	volatile double remove_start;
	/* results */
	int create_err;			/* of hold */
	int up_err;
	double blocked_ms;		/* -1: the removal did not wait on hold */
};

static void *holder(void *arg)
{
	struct race *r = arg;
	double t;

	r->blocked_ms = -1;
	r->create_err = r->up_err = -EAGAIN;
	if (wait_down(r->events, r->pre) < 0) {
		printf("# no link event for %s going down\n", r->pre);
		goto out;
	}
	r->create_err = r->create(r->hold);
	if (r->create_err)
		goto out;
	r->up_err = bring_up(r->hold);
	if (r->up_err)
		goto out;
	while (!r->removed && now_ms() - r->remove_start < WAIT_MS)
		usleep(1000);
	if (r->removed)
		goto out;
	printf("# %s is up and the removal has not returned after %d ms: deleting %s\n",
	       r->hold, WAIT_MS, r->hold);
	fflush(stdout);
	t = now_ms();
	if (r->destroy(r->hold))
		printf("# deleting %s failed\n", r->hold);
	while (!r->removed)
		usleep(1000);
	r->blocked_ms = now_ms() - r->remove_start;
	printf("# the removal returned %.0f ms after it started, %.0f ms after %s was deleted\n",
	       r->blocked_ms, now_ms() - t, r->hold);
out:
	return NULL;
}

/*
 * One round: pre must be up on the phy; remove() removes the phy.  Returns
 * 1 when the removal waited until hold was deleted, -1 when hold was left
 * behind on the unregistered phy (stop: that is the race's other outcome),
 * 0 otherwise.
 */
static int race_round(struct race *r, int (*remove)(void))
{
	pthread_t th;
	int err;

	r->removed = 0;
	pthread_create(&th, NULL, holder, r);
	r->remove_start = now_ms();
	err = remove();
	r->removed = 1;
	pthread_join(th, NULL);
	close(r->events);
	if (err) {
		fprintf(stderr, "removing the phy: %s\n", strerror(-err));
		exit(2);
	}
	if (r->blocked_ms >= 0)
		return 1;
	if (!r->create_err && if_nametoindex(r->hold)) {
		printf("# %s was created after the unregistration read opencount and is left behind (up: %s)\n",
		       r->hold, r->up_err ? strerror(-r->up_err) : "yes");
		return -1;
	}
	return 0;
}

/* run rounds until one waits; setup() prepares r for round i */
static int race_main(const char *prog, int argc, char **argv,
		     void (*setup)(struct race *r, int i), int (*remove)(void))
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50;
	double budget_ms = (argc > 2 ? atoi(argv[2]) : 240) * 1e3;
	double tstart = now_ms();
	int i, res = 0, late = 0;
	struct race r;

	for (i = 0; i < rounds && now_ms() - tstart < budget_ms; i++) {
		memset(&r, 0, sizeof(r));
		setup(&r, i);
		res = race_round(&r, remove);
		if (res)
			break;
		printf("# round %d: %s %s\n", i, r.hold,
		       r.create_err ? strerror(-r.create_err) : "created after the removal");
	}
	if (res < 0)
		late = 1;
	printf("# %s: %d rounds, %s\n", prog, i + (res != 0),
	       res > 0 ? "the removal waited until the held interface was deleted" :
	       late ? "an interface was left behind on the removed phy" : "no round made the removal wait");
	return res > 0 ? 0 : 1;
}
#endif
