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
 * in wiphy_unregister(): the creator stops, the opener deletes the interface
 * (NL80211_CMD_DEL_INTERFACE; its NETDEV_DOWN wakes dev_wait) and the time
 * the deletion stayed blocked is printed.
 *
 * Usage: wiphy_unregister [ROUNDS [SECONDS]] (default 200 rounds, 240 s).
 * Prints "# ..." lines; exit 0 when a deletion was seen blocked until the
 * interface was deleted, 1 when no round got there, 2 on setup errors.
 */
#include <linux/nl80211.h>
#include <pthread.h>
#include <unistd.h>

#include "genl.h"

/* drivers/net/wireless/mac80211_hwsim.h (not a uapi header) */
#define HWSIM_CMD_NEW_RADIO 4
#define HWSIM_CMD_DEL_RADIO 5
#define HWSIM_ATTR_RADIO_ID 10
#define HWSIM_ATTR_RADIO_NAME 17
#define HWSIM_ATTR_NO_VIF 18

#define WAIT_MS 1500

static int nl80211_id, hwsim_id;

/* shared state of one round */
static volatile int round_stop, del_done, created, opened, creator_done;
static volatile double del_start;
static int wiphy_idx;
static char ifname[IFNAMSIZ];
static volatile double blocked_ms = -1;

static void *creator(void *arg)
{
	int fd = nl_open();
	int seq = 1;

	(void)arg;
	while (!round_stop && !(del_start > 0 && now_ms() - del_start > WAIT_MS)) {
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
	creator_done = 1;
	close(fd);
	return NULL;
}

/* NL80211_CMD_DEL_INTERFACE: closes (NETDEV_DOWN wakes dev_wait), unregisters */
static int del_interface(const char *name)
{
	int fd = nl_open();
	struct msg m;
	int err;

	msg_init(&m, nl80211_id, NL80211_CMD_DEL_INTERFACE);
	m.n.nlmsg_seq = 1;
	put_u32(&m, NL80211_ATTR_IFINDEX, if_nametoindex(name));
	err = talk(fd, &m, NULL);
	close(fd);
	return err;
}

/*
 * Keep the interface up whenever it exists.  When the deletion has been
 * running for WAIT_MS with the interface up, it waits on us: stop the
 * creator, delete the interface and time the rest.
 */
static void *opener(void *arg)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	(void)arg;
	while (!round_stop) {
		if (del_start > 0 && now_ms() - del_start > WAIT_MS && is_up(fd, ifname)) {
			double t = now_ms();

			int err;

			printf("# %s is up and HWSIM_CMD_DEL_RADIO has not returned after %d ms: deleting %s\n",
			       ifname, WAIT_MS, ifname);
			fflush(stdout);
			while (!creator_done)
				usleep(1000);
			err = del_interface(ifname);
			if (err)
				printf("# NL80211_CMD_DEL_INTERFACE %s: %s\n", ifname, strerror(-err));
			while (!del_done)
				usleep(1000);
			blocked_ms = now_ms() - del_start;
			printf("# DEL_RADIO returned %.0f ms after it started, %.0f ms after %s was deleted\n",
			       blocked_ms, now_ms() - t, ifname);
			break;
		}
		if (set_up(fd, ifname, 1) == 0)
			opened++;
	}
	close(fd);
	return NULL;
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
		round_stop = del_done = created = opened = creator_done = 0;
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
		else if (if_nametoindex(ifname)) {
			/* created after wiphy_unregister() read opencount */
			late++;
			printf("# %s was created after the removal and is left behind\n", ifname);
			break;
		}
	}
	printf("# %d rounds, %d with DEL_RADIO blocked until the interface was deleted, %d left an interface behind\n",
	       r, hits, late);
	return hits ? 0 : 1;
}
