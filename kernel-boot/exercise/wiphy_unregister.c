// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exerciser for the wait in wiphy_unregister() (net/wireless/core.c):
 *
 *	wait_event(rdev->dev_wait, ({ wiphy_lock(); __count = rdev->opencount;
 *				      wiphy_unlock(); __count == 0; }));
 *
 * The wait sleeps only when something holds the wiphy open (an interface
 * up, a P2P/NAN device started) when wiphy_unregister() starts.
 * ieee80211_unregister_hw() closes and removes every interface under RTNL
 * just before, so the only userspace way to have opencount != 0 there is
 * to create a new interface with nl80211 after that removal and open it
 * before wiphy_unregister() reads opencount (see unreg_race.h).  nl80211
 * has parallel_ops, so its NEW_INTERFACE is not serialised with the
 * MAC80211_HWSIM family's DEL_RADIO by genl_mutex.
 *
 * Each round: HWSIM_CMD_NEW_RADIO (no default interface), an interface
 * "wlsp<i>" made with NL80211_CMD_NEW_INTERFACE, then HWSIM_CMD_DEL_RADIO;
 * the holder thread creates and brings up "wlsi<i>" when wlsp<i> goes.
 *
 * Usage: wiphy_unregister [ROUNDS [SECONDS]] (default 50 rounds, 240 s).
 * Prints "# ..." lines; exit 0 when a removal waited until the held
 * interface was deleted, 1 when not, 2 on setup errors.
 */
#include <linux/nl80211.h>

#include "unreg_race.h"

/* drivers/net/wireless/mac80211_hwsim.h (not a uapi header) */
#define HWSIM_CMD_NEW_RADIO 4
#define HWSIM_CMD_DEL_RADIO 5
#define HWSIM_ATTR_RADIO_ID 10
#define HWSIM_ATTR_RADIO_NAME 17
#define HWSIM_ATTR_NO_VIF 18

static int nl80211_id, hwsim_id, radio, wiphy_idx;

static int hwsim_cmd(int cmd, int id, const char *name)
{
	int fd = nl_open();
	struct msg m;
	int ret;

	msg_init(&m, hwsim_id, cmd);
	m.n.nlmsg_seq = 1;
	if (name)
		put_str(&m, HWSIM_ATTR_RADIO_NAME, name);
	if (cmd == HWSIM_CMD_NEW_RADIO)
		put(&m, HWSIM_ATTR_NO_VIF, NULL, 0);
	else
		put_u32(&m, HWSIM_ATTR_RADIO_ID, id);
	ret = talk(fd, &m, NULL);
	close(fd);
	return ret;
}

static int create(const char *name)
{
	return genl_iface(nl80211_id, NL80211_CMD_NEW_INTERFACE, NL80211_ATTR_WIPHY, wiphy_idx,
			  NL80211_ATTR_IFNAME, name, NL80211_ATTR_IFTYPE, NL80211_IFTYPE_STATION);
}

/* NL80211_CMD_DEL_INTERFACE: closes (NETDEV_DOWN wakes dev_wait), unregisters */
static int destroy(const char *name)
{
	return genl_iface(nl80211_id, NL80211_CMD_DEL_INTERFACE, NL80211_ATTR_IFINDEX,
			  if_nametoindex(name), 0, NULL, 0, 0);
}

static void setup(struct race *r, int i)
{
	char name[32], path[96];
	int err;

	snprintf(name, sizeof(name), "wls%d", i);
	radio = hwsim_cmd(HWSIM_CMD_NEW_RADIO, 0, name);
	if (radio < 0) {
		fprintf(stderr, "wiphy_unregister: HWSIM_CMD_NEW_RADIO: %s\n", strerror(-radio));
		exit(2);
	}
	snprintf(path, sizeof(path), "/sys/class/ieee80211/%s/index", name);
	wiphy_idx = read_int(path);
	if (wiphy_idx < 0) {
		fprintf(stderr, "wiphy_unregister: cannot read %s\n", path);
		exit(2);
	}
	r->create = create;
	r->destroy = destroy;
	snprintf(r->pre, IFNAMSIZ, "wlsp%d", i);
	snprintf(r->hold, IFNAMSIZ, "wlsi%d", i);
	err = create(r->pre);
	if (err) {
		fprintf(stderr, "wiphy_unregister: NL80211_CMD_NEW_INTERFACE %s: %s\n", r->pre, strerror(-err));
		exit(2);
	}
	err = bring_up(r->pre);
	if (err) {
		fprintf(stderr, "wiphy_unregister: bringing %s up: %s\n", r->pre, strerror(-err));
		exit(2);
	}
	r->events = link_events();
}

static int remove_radio(void)
{
	return hwsim_cmd(HWSIM_CMD_DEL_RADIO, radio, NULL);
}

int main(int argc, char **argv)
{
	int fd = nl_open();

	nl80211_id = family_id(fd, "nl80211");
	hwsim_id = family_id(fd, "MAC80211_HWSIM");
	close(fd);
	if (nl80211_id < 0 || hwsim_id < 0) {
		fprintf(stderr, "wiphy_unregister: no nl80211 or MAC80211_HWSIM family\n");
		return 2;
	}
	return race_main("wiphy_unregister", argc, argv, setup, remove_radio);
}
