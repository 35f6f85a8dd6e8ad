/* device_name.h — how devices are written everywhere: "cpu" or "cuda:N"
 * (N a decimal number below 1024), and, for one of several virtual devices
 * sharing that device, the same followed by "/vK" ("cuda:0/v1", "cpu/v0";
 * K below MS_MAX_DEVICES), as the trainer names them and plans list them.
 *
 * Contract: each returns 1 when s has that form, else 0. */
#ifndef MS_DEVICE_NAME_H
#define MS_DEVICE_NAME_H

int ms_device_name_valid(const char *s);
int ms_device_label_valid(const char *s);

#endif
