// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exerciser for the wait in wpan_phy_unregister() (net/ieee802154/core.c):
 *
 *	wait_event(rdev->dev_wait, ({ rtnl_lock(); __count = rdev->opencount;
 *				      rtnl_unlock(); __count == 0; }));
 *
 * The wait sleeps only when an interface of the phy is up when
 * wpan_phy_unregister() starts.  ieee802154_unregister_hw() closes and
 * removes every interface under RTNL just before, so the only userspace way
 * to have opencount != 0 there is to create a new interface after that
 * removal and open it before wpan_phy_unregister() reads opencount (see
 * unreg_race.h).  The MAC802154_HWSIM DEL_RADIO command cannot be used for
 * the removal: it and nl802154 NEW_INTERFACE (and the old IEEE802154
 * ADD_IFACE) are ops of genetlink families without parallel_ops, all run
 * under genl_mutex, so no interface can be created during a DEL_RADIO.
 * Unbinding the mac802154_hwsim platform driver in sysfs removes the
 * radios (hwsim_remove()) without genl_mutex.
 *
 * Each round: bind the driver if needed (two radios), an interface
 * "wpsp<i>" made with NL802154_CMD_NEW_INTERFACE on the radio added last
 * (removed last), then the unbind; the holder thread creates and brings up
 * "wpsi<i>" when wpsp<i> goes.
 *
 * Usage: wpan_phy_unregister [ROUNDS [SECONDS]] (default 50 rounds, 240 s).
 * Prints "# ..." lines; exit 0 when a removal waited until the held
 * interface was deleted, 1 when not, 2 on setup errors.
 */
#include <dirent.h>
#include <fcntl.h>

#include "unreg_race.h"

/* include/net/nl802154.h */
#define NL802154_CMD_NEW_INTERFACE 7
#define NL802154_CMD_DEL_INTERFACE 8
#define NL802154_ATTR_WPAN_PHY 1
#define NL802154_ATTR_IFINDEX 3
#define NL802154_ATTR_IFNAME 4
#define NL802154_ATTR_IFTYPE 5
#define NL802154_IFTYPE_NODE 0

#define DRV "/sys/bus/platform/drivers/mac802154_hwsim"
#define DEV "mac802154_hwsim"

static int nl802154_id, phy_idx;

static int create(const char *name)
{
	return genl_iface(nl802154_id, NL802154_CMD_NEW_INTERFACE, NL802154_ATTR_WPAN_PHY, phy_idx,
			  NL802154_ATTR_IFNAME, name, NL802154_ATTR_IFTYPE, NL802154_IFTYPE_NODE);
}

/* NL802154_CMD_DEL_INTERFACE: closes (NETDEV_DOWN wakes dev_wait), unregisters */
static int destroy(const char *name)
{
	return genl_iface(nl802154_id, NL802154_CMD_DEL_INTERFACE, NL802154_ATTR_IFINDEX,
			  if_nametoindex(name), 0, NULL, 0, 0);
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

/* the highest phy index in /sys/class/ieee802154: the radio added last */
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

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/ieee802154/%s/index", e->d_name);
		idx = read_int(path);
		if (idx > best)
			best = idx;
	}
	closedir(d);
	return best;
}

static void setup(struct race *r, int i)
{
	int err;

	if (access(DRV "/" DEV, F_OK) != 0) {
		err = write_str(DRV "/bind", DEV);
		if (err) {
			fprintf(stderr, "wpan_phy_unregister: bind: %s\n", strerror(-err));
			exit(2);
		}
	}
	phy_idx = last_phy();
	if (phy_idx < 0) {
		fprintf(stderr, "wpan_phy_unregister: no phy in /sys/class/ieee802154\n");
		exit(2);
	}
	r->create = create;
	r->destroy = destroy;
	snprintf(r->pre, IFNAMSIZ, "wpsp%d", i);
	snprintf(r->hold, IFNAMSIZ, "wpsi%d", i);
	err = create(r->pre);
	if (err) {
		fprintf(stderr, "wpan_phy_unregister: NL802154_CMD_NEW_INTERFACE %s: %s\n", r->pre, strerror(-err));
		exit(2);
	}
	err = bring_up(r->pre);
	if (err) {
		fprintf(stderr, "wpan_phy_unregister: bringing %s up: %s\n", r->pre, strerror(-err));
		exit(2);
	}
	r->events = link_events();
}

static int unbind(void)
{
	return write_str(DRV "/unbind", DEV);
}

int main(int argc, char **argv)
{
	int fd = nl_open();

	nl802154_id = family_id(fd, "nl802154");
	close(fd);
	if (nl802154_id < 0) {
		fprintf(stderr, "wpan_phy_unregister: no nl802154 family\n");
		return 2;
	}
	return race_main("wpan_phy_unregister", argc, argv, setup, unbind);
}
