/* vgmt_main.c -- vg-memtrace, a Valgrind tool that records every memory
   reference and every address-space event of a program, for vmmu.

   This file is part of vg-memtrace, a Valgrind tool of the vmmu project.
   Copyright (C) 2025 the vmmu authors.

   This program is free software; you can redistribute it and/or modify it
   under the terms of the GNU General Public License as published by the Free
   Software Foundation; either version 2 of the License, or (at your option)
   any later version.  See COPYING in this directory.

   SPDX-License-Identifier: GPL-2.0-or-later

   How it works
   ------------
   Every superblock is instrumented so that each instruction fetch, load,
   store and modify appends one 64-bit record to an in-memory buffer.  The
   records are written by inline IR (a load of the buffer pointer, one store
   per record, a store of the new pointer), not by a helper call per
   reference: a helper is called only when the buffer is nearly full.  That is
   what makes the tool fast (a few times slower than lackey's printf-free
   minimum, hundreds of times faster than lackey's text).

   With --deps=yes (the default) every value carries the sequence number of
   the youngest load it was computed from, and each data reference whose
   address depends on one of the previous 255 data references of its thread
   is written as a dependent record saying how far back (see
   "Instrumentation").

   Address-space events come from the core's tracking callbacks (initial
   mappings, mmap, munmap, mprotect, brk) and from the syscall wrappers
   (mmap flags, mremap, madvise, fork, execve); they go into the same buffer
   in program order, and so do the phase markers a program puts with the
   VMMU_PHASE client request (vmmu.h).  Each process image writes its own stream: at a fork the
   child opens a new one (with --follow-forks=yes), and after an execve the
   new image does: Valgrind runs it again (--trace-children=yes) and it opens
   its stream with its own initial mappings.  A child that is not followed
   clears --trace-children, so what it execs runs natively.  Streams go to a Unix socket (--out=unix:PATH, one
   connection per stream) or to files in a directory (--out=dir:PATH).

   The stream format is in vgmt_format.h and docs/recording.md.
*/

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_options.h"
#include "pub_tool_machine.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_clientstate.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "pub_tool_mallocfree.h"
#include "libvex_guest_amd64.h"

#include "vgmt_format.h"

/* Core variables and functions that the installed tool headers do not
   declare but libcoregrind exports (pub_core_clientstate.h,
   pub_core_libcfile.h of Valgrind 3.x). */
extern Addr  VG_(clstk_end);
extern Addr  VG_(clstk_start_base);
extern Addr  VG_(brk_base);
extern Int   VG_(safe_fd) ( Int oldfd );
extern Bool  VG_(clo_trace_children);

/*------------------------------------------------------------*/
/*--- Options                                              ---*/
/*------------------------------------------------------------*/

static const HChar* clo_out = NULL;    /* unix:PATH or dir:PATH */
static Bool clo_instr = True;          /* write instruction fetches */
static Bool clo_follow_forks = True;   /* give forked children a stream */
static Bool clo_debug = False;         /* print every event to the log */
static Bool clo_deps = True;           /* track load dependences */

static Bool vgmt_process_cmd_line_option ( const HChar* arg )
{
   if      VG_STR_CLO(arg,  "--out",          clo_out) {}
   else if VG_BOOL_CLO(arg, "--instr",        clo_instr) {}
   else if VG_BOOL_CLO(arg, "--follow-forks", clo_follow_forks) {}
   else if VG_BOOL_CLO(arg, "--deps",         clo_deps) {}
   else if VG_BOOL_CLO(arg, "--vgmt-debug",   clo_debug) {}
   else
      return False;
   return True;
}

static void vgmt_print_usage ( void )
{
   VG_(printf)(
"    --out=unix:PATH|dir:PATH  where streams go: a connection per stream to\n"
"                              the Unix socket PATH, or a file per stream in\n"
"                              the directory PATH [required]\n"
"    --instr=no|yes            record instruction fetches; with no, only\n"
"                              instruction counts are kept [yes]\n"
"    --follow-forks=no|yes     record forked children [yes]\n"
"    --deps=no|yes             track which load each address was computed\n"
"                              from (dependent records, kinds 8-10) [yes]\n"
   );
}

static void vgmt_print_debug_usage ( void )
{
   VG_(printf)(
"    --vgmt-debug=no|yes       print every address-space event [no]\n"
   );
}

/*------------------------------------------------------------*/
/*--- Raw system calls                                     ---*/
/*------------------------------------------------------------*/

/* The tool interface has no socket calls; the tool runs on the host, so a
   plain syscall instruction is all it takes.  Returns -errno on failure. */
static Long vgmt_syscall ( Long n, Long a1, Long a2, Long a3,
                           Long a4, Long a5, Long a6 )
{
   Long ret;
   register Long r10 __asm__("r10") = a4;
   register Long r8  __asm__("r8")  = a5;
   register Long r9  __asm__("r9")  = a6;
   __asm__ volatile ( "syscall"
                      : "=a"(ret)
                      : "0"(n), "D"(a1), "S"(a2), "d"(a3),
                        "r"(r10), "r"(r8), "r"(r9)
                      : "rcx", "r11", "memory" );
   return ret;
}

#define VGMT_AF_UNIX        1
#define VGMT_SOCK_STREAM    1
#define VGMT_SOCK_CLOEXEC   02000000
#define VGMT_MSG_NOSIGNAL   0x4000
#define VGMT_SOL_SOCKET     1
#define VGMT_SO_SNDBUF      7
#define VGMT_EINTR          4
#define VGMT_EAGAIN         11
#define VGMT_EEXIST         17

/*------------------------------------------------------------*/
/*--- The output stream                                    ---*/
/*------------------------------------------------------------*/

/* Records per buffer (1 MiB), and the most records one instrumentation group
   writes before checking for room again. */
#define BUF_WORDS  (1 << 17)
#define MAX_GROUP  16

static ULong  vgmt_buf[BUF_WORDS];
static ULong* vgmt_ptr = vgmt_buf;
#define VGMT_LIMIT (vgmt_buf + BUF_WORDS - MAX_GROUP)

static Int   out_fd = -1;
static Bool  out_is_socket = False;
static Bool  out_failed = False;
static ULong bytes_out = 0;

static void flush_buf ( void )
{
   const UChar* p = (const UChar*)vgmt_buf;
   Long n = (Long)((vgmt_ptr - vgmt_buf) * sizeof(ULong));
   vgmt_ptr = vgmt_buf;
   if (out_fd < 0)
      return;
   while (n > 0) {
      Long r = out_is_socket
             ? vgmt_syscall(__NR_sendto, out_fd, (Long)p, n,
                            VGMT_MSG_NOSIGNAL, 0, 0)
             : vgmt_syscall(__NR_write, out_fd, (Long)p, n, 0, 0, 0);
      if (r == -VGMT_EINTR || r == -VGMT_EAGAIN)
         continue;
      if (r <= 0) {
         if (!out_failed)
            VG_(umsg)("vg-memtrace: writing the trace failed (errno %lld); "
                      "the rest of this process is not recorded\n", -r);
         out_failed = True;
         VG_(close)(out_fd);
         out_fd = -1;
         return;
      }
      p += r;
      n -= r;
      bytes_out += (ULong)r;
   }
}

/* Called by instrumented code when fewer than MAX_GROUP slots are left. */
static void vgmt_flush_helper ( void )
{
   flush_buf();
}

static inline void ensure_room ( Int words )
{
   if (vgmt_ptr + words > vgmt_buf + BUF_WORDS)
      flush_buf();
}

static inline ULong mk_tag ( UInt kind, UInt size )
{
   return ((ULong)(kind & 0xF) << 12) | (ULong)(size > 0xFFF ? 0xFFF : size);
}

static inline ULong mk_event ( UInt type, ULong inline_val, UInt nwords )
{
   return (inline_val << 16) | mk_tag(VGMT_K_EVENT, (nwords << 8) | type);
}

/* Dependence tracking's sequence numbers (see "Instrumentation"): the
   running thread's is vgmt_seq, the others' wait in seq_of_tid. */
#define SEQ_START 256
static ULong    vgmt_seq = SEQ_START;
static ULong*   seq_of_tid = NULL;    /* VG_N_THREADS entries */
static ThreadId seq_tid = VG_INVALID_THREADID;

/* Makes tid's sequence number the running one. */
static void seq_switch ( ThreadId tid )
{
   if (tid == seq_tid || seq_of_tid == NULL)
      return;
   if (seq_tid != VG_INVALID_THREADID)
      seq_of_tid[seq_tid] = vgmt_seq;
   vgmt_seq = seq_of_tid[tid];
   seq_tid = tid;
}

static void emit_event ( UInt type, ULong inline_val, UInt nwords,
                         ULong w0, ULong w1, ULong w2, ULong w3 )
{
   ULong ws[4] = { w0, w1, w2, w3 };
   UInt i;
   tl_assert(nwords <= 4);
   ensure_room(1 + nwords);
   *vgmt_ptr++ = mk_event(type, inline_val & 0xFFFFFFFFFFFFULL, nwords);
   for (i = 0; i < nwords; i++)
      *vgmt_ptr++ = ws[i];
}

/* An event whose payload is a string (at most 15 words, the tail kept):
   the inline value is its byte length, the words hold it NUL padded. */
static void emit_string_event ( UInt type, const HChar* str )
{
   UInt len, words, i;
   ULong w;
   len = VG_(strlen)(str);
   if (len > 15 * 8)
      str += len - 15 * 8, len = 15 * 8;   /* keep the tail */
   words = (len + 7) / 8;
   ensure_room(1 + words);
   *vgmt_ptr++ = mk_event(type, len, words);
   for (i = 0; i < words; i++) {
      UInt j;
      w = 0;
      for (j = 0; j < 8 && i * 8 + j < len; j++)
         w |= (ULong)(UChar)str[i * 8 + j] << (8 * j);
      *vgmt_ptr++ = w;
   }
}

static void emit_exe_name ( void )
{
   if (VG_(args_the_exename) != NULL)
      emit_string_event(VGMT_E_EXE_NAME, VG_(args_the_exename));
}

/* Copies the NUL-terminated string at client address a into buf (size n),
   reading only client memory that is mapped readable; "" if none is. */
static void copy_client_string ( Addr a, HChar* buf, SizeT n )
{
   SizeT i = 0;
   while (i + 1 < n) {
      Addr p = a + i;
      if ((i == 0 || VG_IS_PAGE_ALIGNED(p))
          && !VG_(am_is_valid_for_client)(p, 1, VKI_PROT_READ))
         break;
      buf[i] = *(const HChar*)p;
      if (buf[i] == 0)
         return;
      i++;
   }
   buf[i] = 0;
}

static void write_header ( Bool forked )
{
   struct vki_timespec ts;
   ULong hdr[VGMT_HEADER_SIZE / 8];
   UInt flags = (clo_instr ? 0 : VGMT_HF_NO_INSTR)
              | (forked ? VGMT_HF_FORKED : 0)
              | (clo_deps ? VGMT_HF_DEPS : 0);
   VG_(memset)(hdr, 0, sizeof hdr);
   VG_(memcpy)(&hdr[0], VGMT_MAGIC, 8);
   hdr[1] = (ULong)VGMT_VERSION | ((ULong)VGMT_HEADER_SIZE << 16)
          | ((ULong)flags << 32);
   hdr[2] = (ULong)(UInt)VG_(getpid)() | ((ULong)(UInt)VG_(getppid)() << 32);
   VG_(clock_gettime)(&ts, VKI_CLOCK_MONOTONIC);
   hdr[3] = (ULong)ts.tv_sec * 1000000000ULL + (ULong)ts.tv_nsec;
   ensure_room(VGMT_HEADER_SIZE / 8);
   VG_(memcpy)(vgmt_ptr, hdr, sizeof hdr);
   vgmt_ptr += VGMT_HEADER_SIZE / 8;
}

static Int open_socket ( const HChar* path )
{
   struct { UShort family; HChar path[108]; } sa;
   Long fd, r;
   Int sndbuf = 4 << 20;
   if (VG_(strlen)(path) >= sizeof sa.path) {
      VG_(umsg)("vg-memtrace: socket path too long: %s\n", path);
      return -1;
   }
   VG_(memset)(&sa, 0, sizeof sa);
   sa.family = VGMT_AF_UNIX;
   VG_(strcpy)(sa.path, path);
   fd = vgmt_syscall(__NR_socket, VGMT_AF_UNIX,
                     VGMT_SOCK_STREAM | VGMT_SOCK_CLOEXEC, 0, 0, 0, 0);
   if (fd < 0) {
      VG_(umsg)("vg-memtrace: socket() failed (errno %lld)\n", -fd);
      return -1;
   }
   do {
      r = vgmt_syscall(__NR_connect, fd, (Long)&sa, sizeof sa, 0, 0, 0);
   } while (r == -VGMT_EINTR);
   if (r < 0) {
      VG_(umsg)("vg-memtrace: cannot connect to %s (errno %lld)\n", path, -r);
      VG_(close)((Int)fd);
      return -1;
   }
   /* A larger send buffer means fewer stalls while vmmu compresses. */
   vgmt_syscall(__NR_setsockopt, fd, VGMT_SOL_SOCKET, VGMT_SO_SNDBUF,
                (Long)&sndbuf, sizeof sndbuf, 0);
   return (Int)fd;
}

static Int open_file_in ( const HChar* dir )
{
   HChar path[4096];
   Int n;
   for (n = 0; n < 10000; n++) {
      SysRes sr;
      VG_(snprintf)(path, sizeof path, "%s/%d-%d.vgmt", dir,
                    VG_(getpid)(), n);
      sr = VG_(open)(path, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_EXCL, 0644);
      if (!sr_isError(sr))
         return (Int)sr_Res(sr);
      if (sr_Err(sr) != VGMT_EEXIST) {
         VG_(umsg)("vg-memtrace: cannot create %s (errno %lu)\n",
                   path, sr_Err(sr));
         return -1;
      }
   }
   return -1;
}

/* Opens this process image's stream and writes its header. */
static void open_stream ( Bool forked )
{
   Int fd = -1;
   out_failed = False;
   if (VG_(strncmp)(clo_out, "unix:", 5) == 0) {
      fd = open_socket(clo_out + 5);
      out_is_socket = True;
   } else if (VG_(strncmp)(clo_out, "dir:", 4) == 0) {
      fd = open_file_in(clo_out + 4);
      out_is_socket = False;
   }
   if (fd < 0) {
      out_failed = True;
      out_fd = -1;
      return;
   }
   /* Out of the client's fd range: the client cannot close or clobber it,
      and it is close-on-exec. */
   out_fd = VG_(safe_fd)(fd);
   write_header(forked);
   emit_exe_name();
   /* Send the header now: the reader learns of the process at once. */
   flush_buf();
}

/*------------------------------------------------------------*/
/*--- Address-space events                                 ---*/
/*------------------------------------------------------------*/

static UInt prot_of ( Bool rr, Bool ww, Bool xx )
{
   return (rr ? 1 : 0) | (ww ? 2 : 0) | (xx ? 4 : 0);
}

static void emit_mmap ( Addr a, SizeT len, UInt prot, UInt flags )
{
   if (clo_debug)
      VG_(umsg)("vgmt: mmap %#lx+%#lx prot %u flags %#x\n", a, len, prot, flags);
   emit_event(VGMT_E_MMAP, prot | (flags << 4), 2, a, len, 0, 0);
}

/* The syscall in progress (for the flags of an mmap, and to hide the
   core's piecewise tracking of an mremap). */
static Bool  in_mmap = False;
static UWord mmap_flags = 0;
static Long  mmap_fd = -1;
static Bool  in_shmat = False;
static Bool  in_mremap = False;
static Bool  fork_in_parent = False;
static Bool  startup_done = False;
static ThreadId cur_tid = VG_INVALID_THREADID;

#define LNX_MAP_GROWSDOWN 0x100
#define LNX_MAP_STACK     0x20000
#define LNX_MAP_HUGETLB   0x40000

static void vgmt_new_mem_startup ( Addr a, SizeT len, Bool rr, Bool ww,
                                   Bool xx, ULong di_handle )
{
   NSegment const* seg = VG_(am_find_nsegment)(a);
   UInt flags = 0;
   if (!VG_IS_PAGE_ALIGNED(a)) {
      /* A sub-page annotation of a page already reported (the signal
         return trampoline inside Valgrind's own text). */
      return;
   }
   if (a == VG_(brk_base) && seg && seg->kind == SkAnonC) {
      /* Valgrind's placeholder page of the data segment: the heap is
         described by the brk events, starting empty at brk_base, as on
         Linux. */
      return;
   }
   if (seg && seg->kind == SkFileC)
      flags |= VGMT_MF_FILE;
   if (seg && seg->kind == SkShmC)
      flags |= VGMT_MF_SHARED;
   if (a <= VG_(clstk_end) && VG_(clstk_end) < a + len) {
      /* The main stack: Valgrind maps its top and grows it into the
         reservation below on faults, without telling tools, so the stack is
         recorded as one mapping from the bottom of that reservation (as far
         as Linux's stack VMA may grow) to its top. */
      Addr end = a + len;
      NSegment const* below = a > 0 ? VG_(am_find_nsegment)(a - 1) : NULL;
      if (below && below->kind == SkResvn && below->end + 1 == a)
         a = below->start;
      len = end - a;
      flags |= VGMT_MF_STACK;
      if (clo_debug)
         VG_(umsg)("vgmt: main stack %#lx-%#lx\n", a, end);
   }
   emit_mmap(a, len, prot_of(rr, ww, xx), flags);
}

static void vgmt_new_mem_mmap ( Addr a, SizeT len, Bool rr, Bool ww, Bool xx,
                                ULong di_handle )
{
   UInt flags = 0;
   if (in_mremap)
      return;
   if (in_mmap) {
      if (mmap_flags & VKI_MAP_SHARED)
         flags |= VGMT_MF_SHARED;
      if (!(mmap_flags & VKI_MAP_ANONYMOUS) && mmap_fd >= 0)
         flags |= VGMT_MF_FILE;
      if (mmap_flags & LNX_MAP_HUGETLB)
         flags |= VGMT_MF_HUGE;
      if (mmap_flags & (LNX_MAP_GROWSDOWN | LNX_MAP_STACK))
         flags |= VGMT_MF_STACK;
   } else if (in_shmat) {
      flags |= VGMT_MF_SHARED;
   }
   emit_mmap(a, len, prot_of(rr, ww, xx), flags);
}

static void vgmt_die_mem_munmap ( Addr a, SizeT len )
{
   if (in_mremap)
      return;
   if (clo_debug)
      VG_(umsg)("vgmt: munmap %#lx+%#lx\n", a, len);
   emit_event(VGMT_E_MUNMAP, 0, 2, a, len, 0, 0);
}

static void vgmt_change_mem_mprotect ( Addr a, SizeT len, Bool rr, Bool ww,
                                       Bool xx )
{
   if (in_mremap)
      return;
   if (clo_debug)
      VG_(umsg)("vgmt: mprotect %#lx+%#lx prot %u\n", a, len,
                prot_of(rr, ww, xx));
   emit_event(VGMT_E_MPROTECT, prot_of(rr, ww, xx), 2, a, len, 0, 0);
}

static void vgmt_new_mem_brk ( Addr a, SizeT len, ThreadId tid )
{
   if (!startup_done)
      return;   /* the initial break is written once startup is done */
   if (clo_debug)
      VG_(umsg)("vgmt: brk grows to %#lx\n", a + len);
   emit_event(VGMT_E_BRK, 0, 1, a + len, 0, 0, 0);
}

static void vgmt_die_mem_brk ( Addr a, SizeT len )
{
   if (!startup_done)
      return;
   if (clo_debug)
      VG_(umsg)("vgmt: brk shrinks to %#lx\n", a);
   emit_event(VGMT_E_BRK, 0, 1, a, 0, 0, 0);
}

static void vgmt_start_client_code ( ThreadId tid, ULong blocks )
{
   if (!startup_done) {
      /* The initial break: a heap of length zero at brk_base. */
      emit_event(VGMT_E_BRK, 0, 1, VG_(brk_base), 0, 0, 0);
      emit_event(VGMT_E_STARTUP_DONE, 0, 0, 0, 0, 0, 0);
      startup_done = True;
   }
   seq_switch(tid);
   if (tid != cur_tid) {
      emit_event(VGMT_E_THREAD, tid, 0, 0, 0, 0, 0);
      cur_tid = tid;
   }
}

static void vgmt_thread_create ( ThreadId tid, ThreadId child )
{
   /* The new thread's registers are a copy of its creator's, tags included:
      it counts on from its creator's sequence number, so they stay
      consistent. */
   if (seq_of_tid != NULL)
      seq_of_tid[child] = tid == seq_tid ? vgmt_seq : seq_of_tid[tid];
   emit_event(VGMT_E_THREAD_CREATE, child, 0, 0, 0, 0, 0);
}

/* VMMU_PHASE(id) (vmmu.h): a phase marker in program order, after the
   records of the superblock that made the request. */
static Bool vgmt_handle_client_request ( ThreadId tid, UWord* arg,
                                         UWord* ret )
{
   if (arg[0] != VGMT_USERREQ_PHASE)
      return False;
   if (clo_debug)
      VG_(umsg)("vgmt: phase %u\n", (UInt)arg[1]);
   emit_event(VGMT_E_PHASE, (UInt)arg[1], 0, 0, 0, 0, 0);
   *ret = 0;
   return True;
}

static void vgmt_thread_exit ( ThreadId tid )
{
   emit_event(VGMT_E_THREAD_EXIT, tid, 0, 0, 0, 0, 0);
}

static void vgmt_pre_syscall ( ThreadId tid, UInt sysno, UWord* args,
                               UInt nargs )
{
   switch (sysno) {
   case __NR_mmap:
      in_mmap = True;
      mmap_flags = args[3];
      mmap_fd = (Long)args[4];
      break;
   case __NR_shmat:
      in_shmat = True;
      break;
   case __NR_mremap:
      in_mremap = True;
      break;
   case __NR_execve:
   case __NR_execveat: {
      /* A successful execve never returns to this image: flush now.  The
         record names the program, so that vmmu can say which one it did not
         follow if no stream of the new image arrives. */
      HChar path[15 * 8 + 1];
      copy_client_string(sysno == __NR_execve ? args[0] : args[1],
                         path, sizeof path);
      emit_string_event(VGMT_E_EXEC, path);
      flush_buf();
      break;
   }
   case __NR_clone:
   case __NR_fork:
   case __NR_vfork:
      fork_in_parent = False;
      break;
   default:
      break;
   }
}

static void vgmt_post_syscall ( ThreadId tid, UInt sysno, UWord* args,
                                UInt nargs, SysRes res )
{
   switch (sysno) {
   case __NR_mmap:
      in_mmap = False;
      break;
   case __NR_shmat:
      in_shmat = False;
      break;
   case __NR_mremap:
      in_mremap = False;
      if (!sr_isError(res)) {
         if (clo_debug)
            VG_(umsg)("vgmt: mremap %#lx+%#lx -> %#lx+%#lx\n",
                      args[0], args[1], sr_Res(res), args[2]);
         emit_event(VGMT_E_MREMAP, 0, 4, args[0], args[1], sr_Res(res),
                    args[2]);
      }
      break;
   case __NR_madvise:
      if (!sr_isError(res)) {
         if (clo_debug)
            VG_(umsg)("vgmt: madvise %#lx+%#lx advice %lu\n",
                      args[0], args[1], args[2]);
         emit_event(VGMT_E_MADVISE, args[2], 2, args[0], args[1], 0, 0);
      }
      break;
   case __NR_execve:
   case __NR_execveat:
      emit_event(VGMT_E_EXEC_FAILED, 0, 0, 0, 0, 0, 0);
      break;
   case __NR_clone:
   case __NR_fork:
   case __NR_vfork:
      if (fork_in_parent && !sr_isError(res) && sr_Res(res) > 0) {
         if (clo_debug)
            VG_(umsg)("vgmt: fork -> child %lu\n", sr_Res(res));
         emit_event(VGMT_E_FORK, sr_Res(res), 0, 0, 0, 0, 0);
      }
      fork_in_parent = False;
      break;
   default:
      break;
   }
}

static void vgmt_atfork_parent ( ThreadId tid )
{
   fork_in_parent = True;
}

static void vgmt_atfork_child ( ThreadId tid )
{
   /* The child inherited a copy of the parent's buffer and its connection:
      drop both (the parent writes them) and start the child's own stream. */
   vgmt_ptr = vgmt_buf;
   if (out_fd >= 0)
      VG_(close)(out_fd);
   out_fd = -1;
   in_mmap = in_shmat = in_mremap = fork_in_parent = False;
   cur_tid = tid;
   bytes_out = 0;
   if (clo_follow_forks) {
      open_stream(True);
      emit_event(VGMT_E_THREAD, tid, 0, 0, 0, 0, 0);
   } else {
      /* Not recorded: vmmu learns of the child from the parent's fork record
         and says it was not followed.  Whatever the child execs runs without
         Valgrind (--trace-children=yes is there for the recorded process's
         own execs), so unrecorded children cost nothing more. */
      out_failed = True;
      VG_(clo_trace_children) = False;
   }
}

/*------------------------------------------------------------*/
/*--- Instrumentation                                      ---*/
/*------------------------------------------------------------*/

/* Dependence tracking (--deps=yes)
   --------------------------------
   Every value carries a tag: the sequence number of the youngest load it was
   computed from, or 0 for none.  A load's result is tagged with the load's
   own sequence number; every other IR operation (arithmetic, conversions,
   selects, helper calls computing flags) takes the maximum of its operands'
   tags; constants have none.  The tags of IR temporaries are IR temporaries
   of the instrumented superblock (tmp_tag); the guest registers' tags live
   in the shadow guest state at layout->total_sizeB, as Memcheck keeps its
   V bits there, so each thread has its own and a signal frame saves them.
   There is one 64-bit tag per 8-byte slot of the guest state and per 16-byte
   half of a vector register.  A write that covers a slot whole replaces its
   tag; a narrower one (AL, AX, a 32-bit lane of an XMM register) takes the
   maximum of the new tag and the slot's old one, since the register then
   holds part of each value.  Guarded writes (a guarded dirty helper) take
   the maximum too.  The instruction pointer has no tag: where the program
   goes is control flow, not data; nor has the flags thunk's operation
   (CC_OP, a constant; the operands CC_DEP1/2 and CC_NDEP carry the data).  Memory is not shadowed: a value stored
   and loaded back is tagged with the reload.

   At each data reference dep = seq - tag(address); when it is 1..255 the
   record is of kind 8-10 (vgmt_format.h), chosen by inline IR without a
   branch.  Sequence numbers start at SEQ_START, so an untagged address
   (tag 0) is always more than 255 references back.  The running thread's
   number is vgmt_seq: loaded once by a superblock that makes data
   references, advanced by constants (and by the guard of a guarded
   reference), stored back whenever its records are written.  Each thread
   keeps its own (seq_of_tid, switched in vgmt_start_client_code); a new
   thread starts from its creator's, so the tags it inherits in its copied
   registers stay consistent (the decoder drops distances that reach before
   the thread's stream began). */

typedef IRExpr IRAtom;

typedef enum { EvFetch, EvLoad, EvStore, EvModify, EvCount } EvKind;

typedef struct {
   EvKind  kind;
   IRAtom* addr;    /* EvLoad/EvStore/EvModify */
   IRAtom* atag;    /* the address's tag; NULL: it has none */
   IRAtom* seq;     /* the reference's sequence number (--deps=yes) */
   Addr    iaddr;   /* EvFetch */
   ULong   count;   /* EvCount; size for the others */
} Ev;

/* The events of the superblock being instrumented that have not been
   written out as IR yet (in program order). */
static Ev    evs[MAX_GROUP];
static Int   n_evs = 0;
static ULong pending_instrs = 0;   /* --instr=no: IMarks not yet counted */

/* Tracking state of the superblock being instrumented. */
static IRAtom** tmp_tag = NULL;    /* tag of each original temporary */
static Int      tmp_tag_cap = 0;
static IRAtom*  seq_base = NULL;   /* vgmt_seq as loaded, or as a guard moved it */
static ULong    seq_k = 0;         /* data references since seq_base */
static Bool     seq_dirty = False; /* vgmt_seq in memory is behind */
static Int      shadow_base = 0;   /* layout->total_sizeB */

#define YMM_LO  ((Int)offsetof(VexGuestAMD64State, guest_YMM0))
#define YMM_HI  ((Int)(offsetof(VexGuestAMD64State, guest_YMM16) + sizeof(U256)))
#define RIP_OFF ((Int)offsetof(VexGuestAMD64State, guest_RIP))
#define CC_OP_OFF ((Int)offsetof(VexGuestAMD64State, guest_CC_OP))

/* Guest state without a tag: the instruction pointer (control flow) and the
   flags thunk's operation, a constant that says how to read the operands
   (CC_DEP1, CC_DEP2, CC_NDEP carry the data). */
static Bool untagged ( Int off )
{
   return off == RIP_OFF || off == CC_OP_OFF;
}

static IRAtom* mk_u64 ( ULong v )
{
   return IRExpr_Const(IRConst_U64(v));
}

static IRAtom* assign_ty ( IRSB* sb, IRType ty, IRExpr* e )
{
   IRTemp t = newIRTemp(sb->tyenv, ty);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

static IRAtom* assign ( IRSB* sb, IRExpr* e )
{
   return assign_ty(sb, Ity_I64, e);
}

/* The tag of an atom of the original superblock (NULL: none). */
static IRAtom* tag_of ( IRAtom* a )
{
   if (a == NULL || a->tag != Iex_RdTmp)
      return NULL;
   tl_assert(a->Iex.RdTmp.tmp < (IRTemp)tmp_tag_cap);
   return tmp_tag[a->Iex.RdTmp.tmp];
}

/* max(a, b) of two tags, NULL being none. */
static IRAtom* tag_max ( IRSB* sb, IRAtom* a, IRAtom* b )
{
   IRAtom* lt;
   if (a == NULL)
      return b;
   if (b == NULL || eqIRAtom(a, b))
      return a;
   lt = assign_ty(sb, Ity_I1, IRExpr_Binop(Iop_CmpLT64U, a, b));
   return assign(sb, IRExpr_ITE(lt, b, a));
}

/* Shadow slots: 16 bytes in the vector registers, 8 elsewhere. */
static Int slot_size ( Int off )
{
   return off >= YMM_LO && off < YMM_HI ? 16 : 8;
}

static Int slot_of ( Int off )
{
   if (off >= YMM_LO && off < YMM_HI)
      return YMM_LO + (off - YMM_LO) / 16 * 16;
   return off / 8 * 8;
}

/* The tag of guest state bytes [off, off+size). */
static IRAtom* shadow_get ( IRSB* sb, Int off, Int size )
{
   IRAtom* t = NULL;
   Int s;
   if (untagged(off))
      return NULL;
   for (s = slot_of(off); s < off + size; s += slot_size(s))
      t = tag_max(sb, t, assign(sb, IRExpr_Get(shadow_base + s, Ity_I64)));
   return t;
}

/* Writes tag to guest state bytes [off, off+size); merge: the write may not
   happen, keep the maximum with the old tags. */
static void shadow_put ( IRSB* sb, Int off, Int size, IRAtom* tag,
                         Bool merge )
{
   Int s;
   if (untagged(off))
      return;
   for (s = slot_of(off); s < off + size; s += slot_size(s)) {
      Bool whole = s >= off && s + slot_size(s) <= off + size;
      IRAtom* v = tag;
      if (!whole || merge) {
         if (tag == NULL)
            continue;   /* max(old, none) is old */
         v = tag_max(sb, assign(sb, IRExpr_Get(shadow_base + s, Ity_I64)),
                     tag);
      }
      addStmtToIRSB(sb, IRStmt_Put(shadow_base + s, v ? v : mk_u64(0)));
   }
}

/* Indexed guest state (the x87 registers): an array of 8-byte elements
   has a parallel array of tags; any other (the x87 tag bytes) is tagged as
   a whole. */
static Bool shadow_array ( IRRegArray* d )
{
   return sizeofIRType(d->elemTy) == 8 && d->base % 8 == 0
          && (d->base + 8 * d->nElems <= YMM_LO || d->base >= YMM_HI);
}

static IRAtom* shadow_geti ( IRSB* sb, IRRegArray* d, IRAtom* ix, Int bias )
{
   if (shadow_array(d))
      return assign(sb, IRExpr_GetI(mkIRRegArray(shadow_base + d->base,
                                                 Ity_I64, d->nElems),
                                    ix, bias));
   return shadow_get(sb, d->base, d->nElems * sizeofIRType(d->elemTy));
}

static void shadow_puti ( IRSB* sb, IRRegArray* d, IRAtom* ix, Int bias,
                          IRAtom* tag )
{
   if (shadow_array(d)) {
      addStmtToIRSB(sb, IRStmt_PutI(mkIRPutI(
         mkIRRegArray(shadow_base + d->base, Ity_I64, d->nElems), ix, bias,
         tag ? tag : mk_u64(0))));
      return;
   }
   shadow_put(sb, d->base, d->nElems * sizeofIRType(d->elemTy), tag, True);
}

/* The tag of an expression that is not a load. */
static IRAtom* tag_of_expr ( IRSB* sb, IRExpr* e )
{
   switch (e->tag) {
   case Iex_Const:
      return NULL;
   case Iex_RdTmp:
      return tag_of(e);
   case Iex_Get:
      return shadow_get(sb, e->Iex.Get.offset, sizeofIRType(e->Iex.Get.ty));
   case Iex_GetI:
      return shadow_geti(sb, e->Iex.GetI.descr, e->Iex.GetI.ix,
                         e->Iex.GetI.bias);
   case Iex_Unop:
      return tag_of(e->Iex.Unop.arg);
   case Iex_Binop:
      return tag_max(sb, tag_of(e->Iex.Binop.arg1),
                     tag_of(e->Iex.Binop.arg2));
   case Iex_Triop: {
      IRTriop* t = e->Iex.Triop.details;
      return tag_max(sb, tag_max(sb, tag_of(t->arg1), tag_of(t->arg2)),
                     tag_of(t->arg3));
   }
   case Iex_Qop: {
      IRQop* q = e->Iex.Qop.details;
      return tag_max(sb, tag_max(sb, tag_of(q->arg1), tag_of(q->arg2)),
                     tag_max(sb, tag_of(q->arg3), tag_of(q->arg4)));
   }
   case Iex_ITE:
      return tag_max(sb, tag_of(e->Iex.ITE.cond),
                     tag_max(sb, tag_of(e->Iex.ITE.iftrue),
                             tag_of(e->Iex.ITE.iffalse)));
   case Iex_CCall: {
      IRAtom* t = NULL;
      Int i;
      for (i = 0; e->Iex.CCall.args[i] != NULL; i++)
         t = tag_max(sb, t, tag_of(e->Iex.CCall.args[i]));
      return t;
   }
   default:
      return NULL;
   }
}

/* The sequence number of a new data reference of the superblock. */
static IRAtom* seq_next ( IRSB* sb )
{
   if (seq_base == NULL) {
      seq_base = assign(sb, IRExpr_Load(Iend_LE, Ity_I64,
                                        mk_u64((ULong)(HWord)&vgmt_seq)));
      seq_k = 0;
   }
   seq_k++;
   seq_dirty = True;
   return assign(sb, IRExpr_Binop(Iop_Add64, seq_base, mk_u64(seq_k)));
}

/* Stores the running sequence number back (with the records it counts). */
static void seq_store ( IRSB* sb )
{
   IRAtom* v;
   if (!seq_dirty)
      return;
   v = seq_k == 0 ? seq_base
                  : assign(sb, IRExpr_Binop(Iop_Add64, seq_base,
                                            mk_u64(seq_k)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mk_u64((ULong)(HWord)&vgmt_seq),
                                  v));
   seq_dirty = False;
}

static Bool is_pow2 ( ULong x )
{
   return x != 0 && (x & (x - 1)) == 0;
}

static UInt log2_of ( ULong x )
{
   UInt n = 0;
   while (x > 1)
      x >>= 1, n++;
   return n;
}

/* The record word of an event: (addr << 16) | tag; a dependent data
   reference takes kind 8-10 with its distance. */
static IRAtom* record_of ( IRSB* sb, Ev* ev )
{
   UInt kind;
   IRAtom* hi;
   ULong plain;
   switch (ev->kind) {
   case EvFetch:
      return mk_u64(((ULong)ev->iaddr << 16)
                    | mk_tag(VGMT_K_FETCH, (UInt)ev->count));
   case EvCount:
      return mk_u64((ev->count << 16) | mk_tag(VGMT_K_ICOUNT, 0));
   case EvLoad:   kind = VGMT_K_LOAD;   break;
   case EvStore:  kind = VGMT_K_STORE;  break;
   case EvModify: kind = VGMT_K_MODIFY; break;
   default: tl_assert(0);
   }
   plain = mk_tag(kind, (UInt)ev->count);
   if (ev->addr->tag == Iex_Const)
      return mk_u64((ev->addr->Iex.Const.con->Ico.U64 << 16) | plain);
   hi = assign(sb, IRExpr_Binop(Iop_Shl64, ev->addr,
                                IRExpr_Const(IRConst_U8(16))));
   if (ev->atag != NULL && ev->seq != NULL && is_pow2(ev->count)
       && ev->count <= (1 << 15)) {
      ULong dtag = ((ULong)(kind | VGMT_K_DEP) << 12)
                 | ((ULong)log2_of(ev->count) << 8);
      IRAtom* dist = assign(sb, IRExpr_Binop(Iop_Sub64, ev->seq, ev->atag));
      IRAtom* near = assign_ty(sb, Ity_I1,
                               IRExpr_Binop(Iop_CmpLT64U, dist, mk_u64(256)));
      IRAtom* dep = assign(sb, IRExpr_Binop(Iop_Or64, dist, mk_u64(dtag)));
      IRAtom* low = assign(sb, IRExpr_ITE(near, dep, mk_u64(plain)));
      return assign(sb, IRExpr_Binop(Iop_Or64, hi, low));
   }
   return assign(sb, IRExpr_Binop(Iop_Or64, hi, mk_u64(plain)));
}

/* Emits IR that makes room in the buffer and returns the buffer pointer. */
static IRAtom* room_then_ptr ( IRSB* sb )
{
   IRAtom* p0 = assign(sb, IRExpr_Load(Iend_LE, Ity_I64,
                                       mk_u64((ULong)(HWord)&vgmt_ptr)));
   IRTemp full = newIRTemp(sb->tyenv, Ity_I1);
   IRDirty* di;
   addStmtToIRSB(sb, IRStmt_WrTmp(full,
      IRExpr_Binop(Iop_CmpLE64U, mk_u64((ULong)(HWord)VGMT_LIMIT), p0)));
   di = unsafeIRDirty_0_N(0, "vgmt_flush_helper",
                          VG_(fnptr_to_fnentry)(&vgmt_flush_helper),
                          mkIRExprVec_0());
   di->guard = IRExpr_RdTmp(full);
   /* Declare that the helper rewrites the pointer, so the reload below is
      not folded into the load above. */
   di->mFx = Ifx_Modify;
   di->mAddr = mk_u64((ULong)(HWord)&vgmt_ptr);
   di->mSize = sizeof(vgmt_ptr);
   addStmtToIRSB(sb, IRStmt_Dirty(di));
   return assign(sb, IRExpr_Load(Iend_LE, Ity_I64,
                                 mk_u64((ULong)(HWord)&vgmt_ptr)));
}

static void store_at ( IRSB* sb, IRAtom* base, ULong off, IRAtom* val )
{
   IRAtom* a = off == 0 ? base
             : assign(sb, IRExpr_Binop(Iop_Add64, base, mk_u64(off)));
   addStmtToIRSB(sb, IRStmt_Store(Iend_LE, a, val));
}

/* Writes out the pending events as inline buffer stores, and the sequence
   number that counts them. */
static void flush_events ( IRSB* sb )
{
   IRAtom* p;
   Int i;
   if (n_evs > 0) {
      p = room_then_ptr(sb);
      for (i = 0; i < n_evs; i++)
         store_at(sb, p, 8 * (ULong)i, record_of(sb, &evs[i]));
      store_at(sb, mk_u64((ULong)(HWord)&vgmt_ptr), 0,
               assign(sb, IRExpr_Binop(Iop_Add64, p,
                                       mk_u64(8 * (ULong)n_evs))));
      n_evs = 0;
   }
   seq_store(sb);
}

static void flush_counts_and_events ( IRSB* sb )
{
   if (pending_instrs > 0) {
      if (n_evs == MAX_GROUP)
         flush_events(sb);
      evs[n_evs].kind = EvCount;
      evs[n_evs].count = pending_instrs;
      n_evs++;
      pending_instrs = 0;
   }
   flush_events(sb);
}

static Ev* add_event ( IRSB* sb, EvKind kind, IRAtom* addr, Addr iaddr,
                       ULong count )
{
   Ev* ev;
   if (n_evs == MAX_GROUP)
      flush_events(sb);
   ev = &evs[n_evs++];
   ev->kind = kind;
   ev->addr = addr;
   ev->atag = NULL;
   ev->seq = NULL;
   ev->iaddr = iaddr;
   ev->count = count;
   return ev;
}

/* Adds a data reference; returns its sequence number (NULL with
   --deps=no), which tags the value a load reads. */
static IRAtom* add_data ( IRSB* sb, EvKind kind, IRAtom* addr, Int size )
{
   Ev* ev;
   if (pending_instrs > 0) {
      add_event(sb, EvCount, NULL, 0, pending_instrs);
      pending_instrs = 0;
   }
   /* A store right after a load of the same address and size, in the same
      instruction, is one read-modify-write reference (lackey's M). */
   if (kind == EvStore && n_evs > 0) {
      Ev* last = &evs[n_evs - 1];
      if (last->kind == EvLoad && last->count == (ULong)size
          && eqIRAtom(last->addr, addr)) {
         last->kind = EvModify;
         return last->seq;
      }
   }
   ev = add_event(sb, kind, addr, 0, (ULong)size);
   if (clo_deps) {
      ev->atag = tag_of(addr);
      ev->seq = seq_next(sb);
   }
   return ev->seq;
}

/* A guarded load or store: written alone, the pointer (and the sequence
   number) advancing only when the guard holds.  Returns its sequence
   number (NULL with --deps=no). */
static IRAtom* add_guarded ( IRSB* sb, EvKind kind, IRAtom* addr, Int size,
                             IRAtom* guard )
{
   IRAtom *p, *g64, *step;
   Ev ev;
   flush_counts_and_events(sb);
   ev.kind = kind;
   ev.addr = addr;
   ev.atag = clo_deps ? tag_of(addr) : NULL;
   ev.seq = clo_deps ? seq_next(sb) : NULL;
   ev.iaddr = 0;
   ev.count = (ULong)size;
   p = room_then_ptr(sb);
   store_at(sb, p, 0, record_of(sb, &ev));
   g64 = assign(sb, IRExpr_Unop(Iop_1Uto64, guard));
   step = assign(sb, IRExpr_Binop(Iop_Shl64, g64,
                                  IRExpr_Const(IRConst_U8(3))));
   store_at(sb, mk_u64((ULong)(HWord)&vgmt_ptr), 0,
            assign(sb, IRExpr_Binop(Iop_Add64, p, step)));
   if (clo_deps) {
      /* The references after it count from base + (k - 1) + guard. */
      IRAtom* b = seq_k == 1 ? seq_base
                : assign(sb, IRExpr_Binop(Iop_Add64, seq_base,
                                          mk_u64(seq_k - 1)));
      seq_base = assign(sb, IRExpr_Binop(Iop_Add64, b, g64));
      seq_k = 0;
      seq_store(sb);
   }
   return ev.seq;
}

/* The tags a dirty helper leaves: on its result and on the guest state it
   writes, the maximum of its arguments', of the guest state it reads and of
   the memory it loads (seq). */
static void dirty_tags ( IRSB* sb, IRDirty* d, IRAtom* seq )
{
   IRAtom* tag = seq;
   Bool always = d->guard->tag == Iex_Const && d->guard->Iex.Const.con->Ico.U1;
   Int i, r;
   for (i = 0; d->args[i] != NULL; i++) {
      IRExpr* a = d->args[i];
      if (a->tag == Iex_RdTmp)
         tag = tag_max(sb, tag, tag_of(a));
   }
   for (i = 0; i < d->nFxState; i++) {
      if (d->fxState[i].fx == Ifx_Write)
         continue;
      for (r = 0; r <= d->fxState[i].nRepeats; r++)
         tag = tag_max(sb, tag, shadow_get(sb,
                  d->fxState[i].offset + r * d->fxState[i].repeatLen,
                  d->fxState[i].size));
   }
   if (d->tmp != IRTemp_INVALID)
      tmp_tag[d->tmp] = tag;
   for (i = 0; i < d->nFxState; i++) {
      if (d->fxState[i].fx == Ifx_Read)
         continue;
      for (r = 0; r <= d->fxState[i].nRepeats; r++)
         shadow_put(sb, d->fxState[i].offset + r * d->fxState[i].repeatLen,
                    d->fxState[i].size, tag, !always);
   }
}

static IRSB* vgmt_instrument ( VgCallbackClosure* closure,
                               IRSB* sbIn,
                               const VexGuestLayout* layout,
                               const VexGuestExtents* vge,
                               const VexArchInfo* archinfo_host,
                               IRType gWordTy, IRType hWordTy )
{
   IRSB* sbOut;
   IRTypeEnv* tyenv = sbIn->tyenv;
   Int i = 0;

   if (gWordTy != Ity_I64 || hWordTy != Ity_I64)
      VG_(tool_panic)("vg-memtrace supports 64-bit guests only");

   sbOut = deepCopyIRSBExceptStmts(sbIn);
   n_evs = 0;
   pending_instrs = 0;
   seq_base = NULL;
   seq_k = 0;
   seq_dirty = False;
   shadow_base = layout->total_sizeB;
   if (clo_deps) {
      if (tyenv->types_used > tmp_tag_cap) {
         if (tmp_tag != NULL)
            VG_(free)(tmp_tag);
         tmp_tag_cap = 2 * tyenv->types_used;
         tmp_tag = VG_(malloc)("vgmt.tmp_tag", tmp_tag_cap * sizeof(IRAtom*));
      }
      VG_(memset)(tmp_tag, 0, tmp_tag_cap * sizeof(IRAtom*));
   }

   /* The preamble before the first IMark is copied as it is. */
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sbOut, sbIn->stmts[i]);
      i++;
   }

   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark:
         if (clo_instr)
            add_event(sbOut, EvFetch, NULL, (Addr)st->Ist.IMark.addr,
                      st->Ist.IMark.len);
         else
            pending_instrs++;
         addStmtToIRSB(sbOut, st);
         break;

      case Ist_WrTmp: {
         IRExpr* data = st->Ist.WrTmp.data;
         IRTemp t = st->Ist.WrTmp.tmp;
         if (data->tag == Iex_Load) {
            IRAtom* seq = add_data(sbOut, EvLoad, data->Iex.Load.addr,
                                   sizeofIRType(data->Iex.Load.ty));
            if (clo_deps)
               tmp_tag[t] = seq;
         } else if (clo_deps) {
            tmp_tag[t] = tag_of_expr(sbOut, data);
         }
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_Store: {
         IRType ty = typeOfIRExpr(tyenv, st->Ist.Store.data);
         add_data(sbOut, EvStore, st->Ist.Store.addr, sizeofIRType(ty));
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_StoreG: {
         IRStoreG* sg = st->Ist.StoreG.details;
         IRType ty = typeOfIRExpr(tyenv, sg->data);
         add_guarded(sbOut, EvStore, sg->addr, sizeofIRType(ty), sg->guard);
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_LoadG: {
         IRLoadG* lg = st->Ist.LoadG.details;
         IRType ty = Ity_INVALID, wide = Ity_INVALID;
         IRAtom* seq;
         typeOfIRLoadGOp(lg->cvt, &wide, &ty);
         seq = add_guarded(sbOut, EvLoad, lg->addr, sizeofIRType(ty),
                           lg->guard);
         if (clo_deps) {
            IRAtom* alt = tag_of(lg->alt);
            tmp_tag[lg->dst] = assign(sbOut, IRExpr_ITE(lg->guard, seq,
                                      alt ? alt : mk_u64(0)));
         }
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_Put:
         if (clo_deps) {
            IRExpr* data = st->Ist.Put.data;
            shadow_put(sbOut, st->Ist.Put.offset,
                       sizeofIRType(typeOfIRExpr(tyenv, data)),
                       tag_of(data), False);
         }
         addStmtToIRSB(sbOut, st);
         break;

      case Ist_PutI:
         if (clo_deps) {
            IRPutI* pi = st->Ist.PutI.details;
            shadow_puti(sbOut, pi->descr, pi->ix, pi->bias,
                        tag_of(pi->data));
         }
         addStmtToIRSB(sbOut, st);
         break;

      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         IRAtom* seq = NULL;
         if (d->mFx != Ifx_None) {
            if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
               seq = add_data(sbOut, EvLoad, d->mAddr, d->mSize);
            if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
               add_data(sbOut, EvStore, d->mAddr, d->mSize);
         }
         if (clo_deps)
            dirty_tags(sbOut, d, seq);
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_CAS: {
         IRCAS* cas = st->Ist.CAS.details;
         Int size = sizeofIRType(typeOfIRExpr(tyenv, cas->dataLo));
         IRAtom* seq;
         if (cas->dataHi != NULL)
            size *= 2;
         seq = add_data(sbOut, EvLoad, cas->addr, size);
         add_data(sbOut, EvStore, cas->addr, size);
         if (clo_deps) {
            tmp_tag[cas->oldLo] = seq;
            if (cas->oldHi != IRTemp_INVALID)
               tmp_tag[cas->oldHi] = seq;
         }
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_LLSC: {
         if (st->Ist.LLSC.storedata == NULL) {
            IRType ty = typeOfIRTemp(tyenv, st->Ist.LLSC.result);
            IRAtom* seq = add_data(sbOut, EvLoad, st->Ist.LLSC.addr,
                                   sizeofIRType(ty));
            if (clo_deps)
               tmp_tag[st->Ist.LLSC.result] = seq;
            flush_counts_and_events(sbOut);
         } else {
            IRType ty = typeOfIRExpr(tyenv, st->Ist.LLSC.storedata);
            add_data(sbOut, EvStore, st->Ist.LLSC.addr, sizeofIRType(ty));
         }
         addStmtToIRSB(sbOut, st);
         break;
      }

      case Ist_Exit:
         /* Everything executed so far is written before leaving. */
         flush_counts_and_events(sbOut);
         addStmtToIRSB(sbOut, st);
         break;

      case Ist_NoOp:
      case Ist_AbiHint:
      case Ist_MBE:
         addStmtToIRSB(sbOut, st);
         break;

      default:
         ppIRStmt(st);
         tl_assert(0);
      }
   }
   flush_counts_and_events(sbOut);
   return sbOut;
}

/*------------------------------------------------------------*/
/*--- Setup and teardown                                   ---*/
/*------------------------------------------------------------*/

static void vgmt_post_clo_init ( void )
{
   if (clo_out == NULL
       || (VG_(strncmp)(clo_out, "unix:", 5) != 0
           && VG_(strncmp)(clo_out, "dir:", 4) != 0)) {
      VG_(fmsg_bad_option)("--out",
         "vg-memtrace needs --out=unix:PATH or --out=dir:PATH\n");
   }
   if (clo_deps) {
      UInt t;
      seq_of_tid = VG_(malloc)("vgmt.seq_of_tid",
                               VG_N_THREADS * sizeof(ULong));
      for (t = 0; t < VG_N_THREADS; t++)
         seq_of_tid[t] = SEQ_START;
   }
   open_stream(False);
}

static void vgmt_fini ( Int exitcode )
{
   emit_event(VGMT_E_EXIT, (ULong)(UInt)exitcode, 0, 0, 0, 0, 0);
   flush_buf();
   if (out_fd >= 0)
      VG_(close)(out_fd);
   out_fd = -1;
   if (VG_(clo_verbosity) > 1)
      VG_(umsg)("vg-memtrace: %llu bytes written\n", bytes_out);
}

static void vgmt_pre_clo_init ( void )
{
   VG_(details_name)            ("vg-memtrace");
   VG_(details_version)         ("1");
   VG_(details_description)     ("memory and address-space tracer for vmmu");
   VG_(details_copyright_author)("Copyright (C) 2025 the vmmu authors; GPL-2.0-or-later.");
   VG_(details_bug_reports_to)  ("the vmmu issue tracker");
   VG_(details_avg_translation_sizeB)(400);

   VG_(basic_tool_funcs)(vgmt_post_clo_init, vgmt_instrument, vgmt_fini);
   VG_(needs_command_line_options)(vgmt_process_cmd_line_option,
                                   vgmt_print_usage,
                                   vgmt_print_debug_usage);
   VG_(needs_syscall_wrapper)(vgmt_pre_syscall, vgmt_post_syscall);
   VG_(needs_client_requests)(vgmt_handle_client_request);

   VG_(track_new_mem_startup)    (vgmt_new_mem_startup);
   VG_(track_new_mem_mmap)       (vgmt_new_mem_mmap);
   VG_(track_die_mem_munmap)     (vgmt_die_mem_munmap);
   VG_(track_change_mem_mprotect)(vgmt_change_mem_mprotect);
   VG_(track_new_mem_brk)        (vgmt_new_mem_brk);
   VG_(track_die_mem_brk)        (vgmt_die_mem_brk);
   VG_(track_start_client_code)  (vgmt_start_client_code);
   VG_(track_pre_thread_ll_create)(vgmt_thread_create);
   VG_(track_pre_thread_ll_exit) (vgmt_thread_exit);

   VG_(atfork)(NULL, vgmt_atfork_parent, vgmt_atfork_child);
}

VG_DETERMINE_INTERFACE_VERSION(vgmt_pre_clo_init)
