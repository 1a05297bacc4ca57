/* vgmt_format.h -- the raw record stream written by vg-memtrace.

   This file is part of vg-memtrace, a Valgrind tool of the vmmu project.
   SPDX-License-Identifier: GPL-2.0-or-later

   The format is specified in docs/recording.md ("The raw record stream"); the
   Rust decoder in crates/vmmu-record/src/raw.rs mirrors these constants.

   A stream is one process image (from its start, fork or exec to its exit or
   exec): a 64-byte header, then little-endian 64-bit words.  The low 16 bits
   of a record word are its tag, the high 48 bits its value:

      bits 63..16  value   (an address for kinds 0-3 and 8-10, a count for
                            kind 4, an inline argument for kind 15)
      bits 15..12  kind
      bits 11..0   size    (bytes, kinds 0-3), or for kinds 8-10:
                   bits 11..8 log2 of the size in bytes,
                   bits  7..0 the dependence (1-255), or for kind 15:
                   bits 11..8 number of payload words that follow (0-15),
                   bits  7..0 event type

   Kinds 8-10 are loads, stores and modifies whose address was computed from
   the value of the data reference that many data references back in the same
   thread (loads, stores and modifies counted; fetches not).  A reference
   with no such dependence is written as kind 0-2, so independent references
   cost nothing.
*/
#ifndef VGMT_FORMAT_H
#define VGMT_FORMAT_H

#define VGMT_MAGIC        "VGMTRACE"
#define VGMT_VERSION      2
#define VGMT_HEADER_SIZE  64

/* Header flags. */
#define VGMT_HF_NO_INSTR  0x1   /* no fetch records; kind 4 carries counts */
#define VGMT_HF_FORKED    0x2   /* the stream starts at a fork, in the child */
#define VGMT_HF_DEPS      0x4   /* dependences are tracked (kinds 8-10 used) */

/* Record kinds (bits 15..12 of the tag). */
#define VGMT_K_LOAD    0x0
#define VGMT_K_STORE   0x1
#define VGMT_K_MODIFY  0x2
#define VGMT_K_FETCH   0x3
#define VGMT_K_ICOUNT  0x4   /* value = instructions retired, no reference */
#define VGMT_K_DEP     0x8   /* added to kinds 0-2: a dependent data reference */
#define VGMT_K_EVENT   0xF

/* Event types (bits 7..0 of a kind-15 tag). */
#define VGMT_E_MMAP          0x01 /* inline prot | flags<<4; start, len      */
#define VGMT_E_MUNMAP        0x02 /* start, len                              */
#define VGMT_E_MPROTECT      0x03 /* inline prot; start, len                 */
#define VGMT_E_MREMAP        0x04 /* old, old_len, new, new_len              */
#define VGMT_E_BRK           0x05 /* end                                     */
#define VGMT_E_FORK          0x06 /* inline child pid                        */
#define VGMT_E_EXEC          0x07 /* execve about to run; inline byte length;
                                     the program's path, NUL padded        */
#define VGMT_E_EXEC_FAILED   0x08 /* the execve returned an error            */
#define VGMT_E_EXIT          0x09 /* inline exit code (low 32 bits)          */
#define VGMT_E_THREAD        0x0A /* inline thread id now running            */
#define VGMT_E_THREAD_CREATE 0x0B /* inline new thread id                    */
#define VGMT_E_THREAD_EXIT   0x0C /* inline thread id                        */
#define VGMT_E_STARTUP_DONE  0x0D /* the initial mappings are complete       */
#define VGMT_E_EXE_NAME      0x0E /* inline byte length; name, NUL padded    */
#define VGMT_E_PHASE         0x0F /* inline phase id (VMMU_PHASE)            */
#define VGMT_E_MADVISE       0x10 /* inline advice; start, len               */

/* The client request of VMMU_PHASE (vmmu.h): VG_USERREQ_TOOL_BASE('V','M'). */
#define VGMT_USERREQ_PHASE   (((unsigned int)'V' << 24) | ((unsigned int)'M' << 16))

/* Mapping flags carried by VGMT_E_MMAP (the same bits as vmmu's MapFlags). */
#define VGMT_MF_SHARED 0x1
#define VGMT_MF_FILE   0x2
#define VGMT_MF_HUGE   0x4
#define VGMT_MF_STACK  0x8

#endif
