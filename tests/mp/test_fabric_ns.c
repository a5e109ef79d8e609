/*
 * Which node a process is: NTBX_NODE when set (and a clear error when it
 * is wrong), else the node its network namespace claimed.  Each node
 * records its addresses, so an address maps to a node.  Permissions are
 * the user's own unless a group is named.  Namespaces need root: without
 * it that part is skipped, and the test says so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ntbx/fabric.h"

static int pipefd[2];    /* children report their node here */
static int release[2];   /* closed by the parent: children may leave */

static int report(int node)
{
	return write(pipefd[1], &node, sizeof node) == sizeof node ? 0 : 11;
}

/* Join with no node given; report the node (or -reason) through the pipe. */
static int join_default(void *arg)
{
	const char *addr = arg;
	close(release[1]);
	if (addr) {
		if (unshare(CLONE_NEWNET) < 0)
			return report(-77), 77;
		char cmd[256];
		snprintf(cmd, sizeof cmd, "ip link set lo up && ip link add ntbxt0 "
		         "type veth peer name ntbxt1 && ip addr add %s/24 dev ntbxt0 "
		         "&& ip link set ntbxt0 up", addr);
		if (system(cmd) != 0)
			return report(-78), 78;
	}
	struct ntbx_fabric *f;
	if (ntbx_fabric_join("ns", -1, &f) < 0) {
		fprintf(stderr, "%s\n", ntbx_errmsg());
		return report(-10), 10;
	}
	if (report(ntbx_fabric_node(f)))
		return 11;
	char c;
	/* Stay until the parent has looked: it closes release[1]. */
	if (read(release[0], &c, 1) < 0)
		return 12;
	ntbx_fabric_leave(f);
	return 0;
}

static int read_node(void)
{
	int node = -1;
	REQUIRE(read(pipefd[0], &node, sizeof node) == sizeof node);
	return node;
}

int main(void)
{
	th_init("ns");
	struct ntbx_fabric_params p = { .nodes = 3, .topology = NTBX_TOPO_SWITCH,
	                                .window = 8 << 20, .gid = -1 };
	REQUIRE(ntbx_fabric_create("ns", &p) == 0);

	/* Permissions: 0700 directory, 0600 files. */
	char dir[512], path[600];
	ntbx_fabric_dir("ns", dir, sizeof dir);
	struct stat st;
	CHECK_EQ(stat(dir, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0700);
	snprintf(path, sizeof path, "%s/node-0.mem", dir);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	struct ntbx_fabric_params pg = p;
	pg.gid = (int)getgid();
	REQUIRE(ntbx_fabric_create("grp", &pg) == 0);
	ntbx_fabric_dir("grp", dir, sizeof dir);
	CHECK_EQ(stat(dir, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0770);
	CHECK_EQ(st.st_gid, getgid());
	ntbx_fabric_destroy("grp");

	/* NTBX_NODE: used when right, a clear error when wrong. */
	struct ntbx_fabric *f;
	setenv("NTBX_NODE", "2", 1);
	CHECK_EQ(ntbx_fabric_join("ns", -1, &f), 0);
	CHECK_EQ(ntbx_fabric_node(f), 2);
	ntbx_fabric_leave(f);
	setenv("NTBX_NODE", "7", 1);
	CHECK_EQ(ntbx_fabric_join("ns", -1, &f), -EINVAL);
	CHECK(strstr(ntbx_errmsg(), "NTBX_NODE='7'") && strstr(ntbx_errmsg(), "0 to 2"));
	setenv("NTBX_NODE", "one", 1);
	CHECK_EQ(ntbx_fabric_join("ns", -1, &f), -EINVAL);
	unsetenv("NTBX_NODE");

	/* Two processes of one namespace are one node. */
	REQUIRE(pipe(pipefd) == 0 && pipe(release) == 0);
	pid_t a = th_spawn(join_default, NULL);
	int na = read_node();
	pid_t b = th_spawn(join_default, NULL);
	int nb = read_node();
	CHECK_EQ(na, nb);
	close(release[1]);
	CHECK_EQ(th_wait(a), 0);
	CHECK_EQ(th_wait(b), 0);
	close(release[0]);
	if (geteuid() != 0) {
		printf("test_fabric_ns: SKIPPED namespace part: needs root\n");
		return th_done("test_fabric_ns");
	}

	/* Namespaces are nodes, and their addresses are recorded. */
	REQUIRE(pipe(release) == 0);
	pid_t c = th_spawn(join_default, "10.213.7.1");
	int nc = read_node();
	pid_t d = th_spawn(join_default, "10.213.8.1");
	int nd = read_node();
	CHECK(nc >= 0 && nd >= 0 && nc != nd && nc != na && nd != na);
	f = th_join("ns", na, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	inet_pton(AF_INET, "10.213.7.1", &sin.sin_addr);
	CHECK_EQ(ntbx_fabric_node_of_addr(f, (void *)&sin, sizeof sin), nc);
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	inet_pton(AF_INET6, "::ffff:10.213.8.1", &s6.sin6_addr);
	CHECK_EQ(ntbx_fabric_node_of_addr(f, (void *)&s6, sizeof s6), nd);
	inet_pton(AF_INET, "10.213.9.1", &sin.sin_addr);
	CHECK_EQ(ntbx_fabric_node_of_addr(f, (void *)&sin, sizeof sin), -ENOENT);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	CHECK_EQ(ntbx_fabric_node_of_addr(f, (void *)&sin, sizeof sin), na);
	ntbx_fabric_leave(f);
	close(release[1]);
	CHECK_EQ(th_wait(c), 0);
	CHECK_EQ(th_wait(d), 0);
	ntbx_fabric_destroy("ns");
	return th_done("test_fabric_ns");
}
