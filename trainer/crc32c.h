/* crc32c.h — CRC-32C (Castagnoli), the checksum of checkpoint files.
 *
 * Contract: ms_crc32c(0, data, n) is the standard CRC-32C of data
 * ("123456789" -> 0xE3069283); pass the previous result as crc to continue
 * over the next piece: ms_crc32c(ms_crc32c(0, a, na), b, nb) equals the CRC
 * of a followed by b. Uses the SSE4.2 instruction where the CPU has it, else
 * a table; both give the same result (ms_crc32c_portable is the table one). */
#ifndef MS_CRC32C_H
#define MS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t ms_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t ms_crc32c_portable(uint32_t crc, const void *data, size_t n);

#endif
