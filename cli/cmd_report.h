/* cmd_report.h — `memsplit report`: a stored run from the run database, in
 * the terminal (80 columns), as JSON, or as a self-contained HTML page with
 * SVG charts (--html FILE).
 *
 * Contract: argv[0] is the subcommand's name ("report"); options are parsed
 * with getopt_long from argv[1]. Returns the process exit status:
 * 0 printed, 1 usage error, 2 the database cannot be opened or read, or
 * holds no such run. Never creates a database. */
#ifndef MS_CMD_REPORT_H
#define MS_CMD_REPORT_H

int ms_cmd_report(int argc, char **argv);

#endif
