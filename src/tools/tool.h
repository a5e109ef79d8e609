/* SPDX-License-Identifier: MIT */
/* tool.h — the subcommands of the ntbx command. */
#ifndef NTBX_TOOLS_TOOL_H
#define NTBX_TOOLS_TOOL_H

/* Each returns the process exit code (0 ok, 1 runtime failure, 2 usage);
 * argv[0] is the subcommand's name. */
int cmd_fabric(int argc, char **argv);
int cmd_perf(int argc, char **argv);
int cmd_pingpong(int argc, char **argv);
int cmd_qp(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_ipof(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_settings(int argc, char **argv);

#endif
