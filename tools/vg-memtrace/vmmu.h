/* vmmu.h -- marks for programs recorded with `vmmu record`.

   This header is MIT-licensed (unlike the rest of tools/vg-memtrace) so that
   any program may include it.
   SPDX-License-Identifier: MIT

   Copyright (C) 2025 the vmmu authors.

   Permission is hereby granted, free of charge, to any person obtaining a
   copy of this software and associated documentation files (the "Software"),
   to deal in the Software without restriction, including without limitation
   the rights to use, copy, modify, merge, publish, distribute, sublicense,
   and/or sell copies of the Software, and to permit persons to whom the
   Software is furnished to do so, subject to the following conditions: the
   above copyright notice and this permission notice shall be included in all
   copies or substantial portions of the Software.  THE SOFTWARE IS PROVIDED
   "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.

   VMMU_PHASE(id) puts a phase marker (vmmu's `Event::Phase { id }`) into the
   trace at this point of the program, between the memory references before
   and after it.  A program marks where its timed region starts and ends:

       #include "vmmu.h"
       ...
       VMMU_PHASE(1);          // warm-up done: the measured region starts
       run();
       VMMU_PHASE(2);

   It is a Valgrind client request (valgrind.h, shipped with Valgrind's
   development files): a few instructions that do nothing when the program
   runs natively or under another Valgrind tool.  `id` is an unsigned 32-bit
   number.  Building the request stores its six argument words to the stack,
   so the trace shows six 8-byte stores just before the marker. */
#ifndef VMMU_H
#define VMMU_H

#include <valgrind/valgrind.h>

/* The client request code: VG_USERREQ_TOOL_BASE('V','M'). */
#define VMMU_USERREQ_PHASE VG_USERREQ_TOOL_BASE('V', 'M')

#define VMMU_PHASE(id)                                                      \
   VALGRIND_DO_CLIENT_REQUEST_STMT(VMMU_USERREQ_PHASE,                      \
                                   (unsigned int)(id), 0, 0, 0, 0)

#endif
