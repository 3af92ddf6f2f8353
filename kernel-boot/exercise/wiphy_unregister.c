// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exerciser for the wait in wiphy_unregister() (net/wireless/core.c):
 *
 *	wait_event(rdev->dev_wait, ({ wiphy_lock(); __count = rdev->opencount;
 *				      wiphy_unlock(); __count == 0; }));
 *
 * The wait sleeps only when something holds the wiphy open (an interface
 * up, a P2P/NAN device started) when the unregistration starts.
 * ieee80211_unregister_hw() closes and removes every interface under RTNL
 * just before, so the only userspace way to have opencount != 0 there is to
 * create a new interface with nl80211 (a parallel_ops family, not serialised
 * with the MAC80211_HWSIM family's DEL_RADIO) after that removal and open
 * it before wiphy_unregister() reads opencount.
 *
 * Each round: create a radio (HWSIM_CMD_NEW_RADIO, no default interface),
 * start a creator thread that loops NL80211_CMD_NEW_INTERFACE on it and an
 * opener thread that loops SIOCSIFFLAGS IFF_UP on the name, then delete the
 * radio (HWSIM_CMD_DEL_RADIO) in the main thread.  If the deletion has not
 * returned after WAIT_MS while the interface is up, the deletion is waiting
 * in wiphy_unregister(): the opener closes the interface (IFF_UP cleared,
 * NETDEV_DOWN wakes dev_wait) and the time the deletion stayed blocked is
 * printed.
 *
 * Usage: wiphy_unregister [ROUNDS [SECONDS]] (default 200 rounds, 240 s).
 * Prints "# ..." lines; exit 0 when a deletion was seen blocked until the
 * interface was closed, 1 when no round got there, 2 on setup errors.
 */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/nl80211.h>
#include <net/if.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* drivers/net/wireless/mac80211_hwsim.h (not a uapi header) */
#define HWSIM_CMD_NEW_RADIO 4
#define HWSIM_CMD_DEL_RADIO 5
#define HWSIM_ATTR_RADIO_ID 10
#define HWSIM_ATTR_RADIO_NAME 17
#define HWSIM_ATTR_NO_VIF 18

#define WAIT_MS 1500

struct msg {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[512];
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
	static __thread char buf[8192];
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

static int nl80211_id, hwsim_id;

/* shared state of one round */
static volatile int round_stop, del_done, created, opened;
static volatile double del_start;
static int wiphy_idx;
static char ifname[IFNAMSIZ];
static volatile double blocked_ms = -1;

static void *creator(void *arg)
{
	int fd = nl_open();
	int seq = 1;

	(void)arg;
	while (!round_stop) {
		struct msg m;
		int err;

		msg_init(&m, nl80211_id, NL80211_CMD_NEW_INTERFACE);
		m.n.nlmsg_seq = seq++;
		put_u32(&m, NL80211_ATTR_WIPHY, wiphy_idx);
		put_str(&m, NL80211_ATTR_IFNAME, ifname);
		put_u32(&m, NL80211_ATTR_IFTYPE, NL80211_IFTYPE_STATION);
		err = talk(fd, &m, NULL);
		if (err == 0)
			created++;
		else if (err == -ENODEV || err == -EINVAL)
			break;	/* the wiphy is gone */
	}
	close(fd);
	return NULL;
}

static int set_up(int fd, int up)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, IFNAMSIZ);
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

static int is_up(int fd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, IFNAMSIZ);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return 0;
	return !!(ifr.ifr_flags & IFF_UP);
}

/*
 * Keep the interface up whenever it exists; when the deletion has been
 * running for WAIT_MS with the interface up, close it and time the rest.
 */
static void *opener(void *arg)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	(void)arg;
	while (!round_stop) {
		if (del_start > 0 && now_ms() - del_start > WAIT_MS && is_up(fd)) {
			double t = now_ms();

			printf("# %s is up and HWSIM_CMD_DEL_RADIO has not returned after %d ms: closing %s\n",
			       ifname, WAIT_MS, ifname);
			fflush(stdout);
			set_up(fd, 0);
			while (!del_done)
				usleep(1000);
			blocked_ms = now_ms() - del_start;
			printf("# DEL_RADIO returned %.0f ms after it started, %.0f ms after %s was closed\n",
			       blocked_ms, now_ms() - t, ifname);
			break;
		}
		if (set_up(fd, 1) == 0)
			opened++;
	}
	close(fd);
	return NULL;
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

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	double budget_ms = (argc > 2 ? atoi(argv[2]) : 240) * 1e3;
	double tstart = now_ms();
	int fd = nl_open();
	int r, seq = 1000, hits = 0, late = 0;

	nl80211_id = family_id(fd, "nl80211");
	hwsim_id = family_id(fd, "MAC80211_HWSIM");
	if (nl80211_id < 0 || hwsim_id < 0) {
		fprintf(stderr, "wiphy_unregister: no nl80211 or MAC80211_HWSIM family\n");
		return 2;
	}
	for (r = 0; r < rounds && !hits && now_ms() - tstart < budget_ms; r++) {
		char name[32], path[96];
		pthread_t tc, to;
		struct msg m;
		int radio, err;
		double t0;

		snprintf(name, sizeof(name), "wls%d", r);
		snprintf(ifname, sizeof(ifname), "wlsi%d", r);
		msg_init(&m, hwsim_id, HWSIM_CMD_NEW_RADIO);
		m.n.nlmsg_seq = seq++;
		put_str(&m, HWSIM_ATTR_RADIO_NAME, name);
		put(&m, HWSIM_ATTR_NO_VIF, NULL, 0);
		radio = talk(fd, &m, NULL);
		if (radio < 0) {
			fprintf(stderr, "wiphy_unregister: NEW_RADIO: %s\n", strerror(-radio));
			return 2;
		}
		snprintf(path, sizeof(path), "/sys/class/ieee80211/%s/index", name);
		wiphy_idx = read_int(path);
		if (wiphy_idx < 0) {
			fprintf(stderr, "wiphy_unregister: cannot read %s\n", path);
			return 2;
		}
		round_stop = del_done = created = opened = 0;
		del_start = 0;
		pthread_create(&tc, NULL, creator, NULL);
		pthread_create(&to, NULL, opener, NULL);
		usleep((r * 7919) % 3000);
		msg_init(&m, hwsim_id, HWSIM_CMD_DEL_RADIO);
		m.n.nlmsg_seq = seq++;
		put_u32(&m, HWSIM_ATTR_RADIO_ID, radio);
		t0 = now_ms();
		del_start = t0;
		err = talk(fd, &m, NULL);
		del_done = 1;
		round_stop = 1;
		pthread_join(tc, NULL);
		pthread_join(to, NULL);
		if (err < 0) {
			fprintf(stderr, "wiphy_unregister: DEL_RADIO: %s\n", strerror(-err));
			return 2;
		}
		if (blocked_ms >= 0)
			hits++;
		else if (if_nametoindex(ifname))
			late++;	/* created after the removal: left behind */
	}
	printf("# %d rounds, %d with DEL_RADIO blocked until the interface was closed, %d left an interface behind\n",
	       r, hits, late);
	return hits ? 0 : 1;
}
