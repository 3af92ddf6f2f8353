// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exerciser for the wait in wpan_phy_unregister() (net/ieee802154/core.c):
 *
 *	wait_event(rdev->dev_wait, ({ rtnl_lock(); __count = rdev->opencount;
 *				      rtnl_unlock(); __count == 0; }));
 *
 * The wait sleeps only when an interface of the phy is up when the
 * unregistration starts.  ieee802154_unregister_hw() closes and removes
 * every interface under RTNL just before, so the only userspace way to have
 * opencount != 0 there is to create a new interface after that removal and
 * open it before wpan_phy_unregister() reads opencount.  The
 * MAC802154_HWSIM DEL_RADIO command cannot be used: it and nl802154
 * NEW_INTERFACE are genetlink ops of families without parallel_ops, both
 * run under genl_mutex, so no interface can be created during a DEL_RADIO.
 * Unbinding the mac802154_hwsim platform driver in sysfs removes the
 * radios (hwsim_remove()) without genl_mutex.
 *
 * Each round: bind the driver (two radios), start a creator thread that
 * loops nl802154 NEW_INTERFACE on the last radio's phy and an opener
 * thread that loops SIOCSIFFLAGS IFF_UP on the name, then unbind in the
 * main thread.  If the unbind has not returned after WAIT_MS while the
 * interface is up, it waits in wpan_phy_unregister(): the creator stops,
 * the opener deletes the interface (NL802154_CMD_DEL_INTERFACE; its
 * NETDEV_DOWN wakes dev_wait) and the time the unbind stayed blocked is
 * printed.
 *
 * Usage: wpan_phy_unregister [ROUNDS [SECONDS]] (default 200 rounds, 240 s).
 * Prints "# ..." lines; exit 0 when an unbind was seen blocked until the
 * interface was deleted, 1 when no round got there, 2 on setup errors.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "genl.h"

/* include/net/nl802154.h */
#define NL802154_CMD_NEW_INTERFACE 7
#define NL802154_CMD_DEL_INTERFACE 8
#define NL802154_ATTR_WPAN_PHY 1
#define NL802154_ATTR_IFINDEX 3
#define NL802154_ATTR_IFNAME 4

#define DRV "/sys/bus/platform/drivers/mac802154_hwsim"
#define DEV "mac802154_hwsim"
#define WAIT_MS 1500

static int nl802154_id;

/* shared state of one round */
static volatile int round_stop, unbind_done, creator_done;
static volatile double unbind_start;
static int phy_idx;
static char ifname[IFNAMSIZ];
static volatile double blocked_ms = -1;

static int waited_long(void)
{
	return unbind_start > 0 && now_ms() - unbind_start > WAIT_MS;
}

static void *creator(void *arg)
{
	int fd = nl_open();
	int seq = 1;

	(void)arg;
	while (!round_stop && !waited_long()) {
		struct msg m;
		int err;

		msg_init(&m, nl802154_id, NL802154_CMD_NEW_INTERFACE);
		m.n.nlmsg_seq = seq++;
		put_u32(&m, NL802154_ATTR_WPAN_PHY, phy_idx);
		put_str(&m, NL802154_ATTR_IFNAME, ifname);
		err = talk(fd, &m, NULL);
		if (err == -ENODEV)
			break;	/* the phy is gone */
	}
	creator_done = 1;
	close(fd);
	return NULL;
}

/* NL802154_CMD_DEL_INTERFACE: closes (NETDEV_DOWN wakes dev_wait), unregisters */
static int del_interface(const char *name)
{
	int fd = nl_open();
	struct msg m;
	int err;

	msg_init(&m, nl802154_id, NL802154_CMD_DEL_INTERFACE);
	m.n.nlmsg_seq = 1;
	put_u32(&m, NL802154_ATTR_IFINDEX, if_nametoindex(name));
	err = talk(fd, &m, NULL);
	close(fd);
	return err;
}

static void *opener(void *arg)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	(void)arg;
	while (!round_stop) {
		if (waited_long() && is_up(fd, ifname)) {
			double t = now_ms();
			int err;

			printf("# %s is up and the unbind has not returned after %d ms: deleting %s\n",
			       ifname, WAIT_MS, ifname);
			fflush(stdout);
			while (!creator_done)
				usleep(1000);
			err = del_interface(ifname);
			if (err)
				printf("# NL802154_CMD_DEL_INTERFACE %s: %s\n", ifname, strerror(-err));
			while (!unbind_done)
				usleep(1000);
			blocked_ms = now_ms() - unbind_start;
			printf("# unbind returned %.0f ms after it started, %.0f ms after %s was deleted\n",
			       blocked_ms, now_ms() - t, ifname);
			break;
		}
		set_up(fd, ifname, 1);
	}
	close(fd);
	return NULL;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* the highest wpan-phyN index: the radio hwsim_probe() added last */
static int last_phy(void)
{
	DIR *d = opendir("/sys/class/ieee802154");
	struct dirent *e;
	int best = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];
		int idx;

		if (strncmp(e->d_name, "wpan-phy", 8))
			continue;
		snprintf(path, sizeof(path), "/sys/class/ieee802154/%s/index", e->d_name);
		idx = read_int(path);
		if (idx > best)
			best = idx;
	}
	closedir(d);
	return best;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	double budget_ms = (argc > 2 ? atoi(argv[2]) : 240) * 1e3;
	double tstart = now_ms();
	int fd = nl_open();
	int r, hits = 0, late = 0;

	nl802154_id = family_id(fd, "nl802154");
	close(fd);
	if (nl802154_id < 0) {
		fprintf(stderr, "wpan_phy_unregister: no nl802154 family\n");
		return 2;
	}
	for (r = 0; r < rounds && !hits && now_ms() - tstart < budget_ms; r++) {
		pthread_t tc, to;
		int err;

		if (access(DRV "/" DEV, F_OK) != 0) {
			err = write_str(DRV "/bind", DEV);
			if (err) {
				fprintf(stderr, "wpan_phy_unregister: bind: %s\n", strerror(-err));
				return 2;
			}
		}
		phy_idx = last_phy();
		if (phy_idx < 0) {
			fprintf(stderr, "wpan_phy_unregister: no wpan-phy in /sys/class/ieee802154\n");
			return 2;
		}
		snprintf(ifname, sizeof(ifname), "wpx%d", r);
		round_stop = unbind_done = creator_done = 0;
		unbind_start = 0;
		pthread_create(&tc, NULL, creator, NULL);
		pthread_create(&to, NULL, opener, NULL);
		usleep((r * 7919) % 3000);
		unbind_start = now_ms();
		err = write_str(DRV "/unbind", DEV);
		unbind_done = 1;
		round_stop = 1;
		pthread_join(tc, NULL);
		pthread_join(to, NULL);
		if (err) {
			fprintf(stderr, "wpan_phy_unregister: unbind: %s\n", strerror(-err));
			return 2;
		}
		if (blocked_ms >= 0)
			hits++;
		else if (if_nametoindex(ifname)) {
			/* created after wpan_phy_unregister() read opencount */
			late++;
			printf("# %s was created after the removal and is left behind\n", ifname);
			break;
		}
	}
	printf("# %d rounds, %d with the unbind blocked until the interface was deleted, %d left an interface behind\n",
	       r, hits, late);
	return hits ? 0 : 1;
}
