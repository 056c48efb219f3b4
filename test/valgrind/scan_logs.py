#!/usr/bin/env python3
"""test/valgrind/scan_logs.py — reads the per-process Valgrind logs that run.sh collects
and tells the errors that concern pg_sched from the others.

    python3 test/valgrind/scan_logs.py LOGDIR [--so PATH] [--src DIR] [--out DIR]

An error is the lines between VALGRINDERROR-BEGIN and VALGRINDERROR-END (--error-markers):
its own stack, then possibly further stacks (where the block was allocated or freed, where
the uninitialised value was created: --track-origins).  A frame is pg_sched's when it is
  - a function defined in pg_sched.so (nm) whose source file is one of the extension's
    src/*.c or include/*.h (inlined PostgreSQL header functions such as heap_getattr are
    compiled into pg_sched.so too but are not its code: their caller's frame counts);
  - or any frame "(in .../pg_sched.so)" (no debug information).

Every error with a pg_sched frame is counted ("with a pg_sched frame").  It is pg_sched's
(the run fails) when a pg_sched frame is in one of its further stacks (pg_sched allocated
the block or created the uninitialised value), or among the first TOP frames of its own
stack, or anywhere in its own stack unless the error is one of PostgreSQL's own that a
Debian build shows (below): then pg_sched is only a caller far up the stack.

PostgreSQL's own (Debian's server is stripped and not built with USE_VALGRIND, so the
suppressions of PostgreSQL's valgrind.supp that name static functions do not match, and
its VALGRIND_MAKE_MEM_DEFINED calls are no-ops):
  - write/pwrite64 of uninitialised padding under RelationCacheInitializePhase3 (the
    relcache init file: valgrind.supp's padding_relcache) or XLogFlush/XLogBackgroundFlush
    (WAL: padding_XLogRecData_write), XLogWrite and write_relcache_init_file being static;
  - uninitialised bytes of shared invalidation messages, used where smgrclosenode looks
    them up (under ReceiveSharedInvalidMessages): inval.c marks their padding defined
    only in USE_VALGRIND builds.
  - "Source and destination overlap in memcpy_chk" in RE_compile_and_cache (the regular
    expression cache, reached from the planner's selectivity of a ~ or !~ clause): its
    memmove of the cache array one entry along, reported under the name of memcpy's
    checked variant (an overlap is what memmove is for); any planning under pg_sched's
    planner hook shows sched_planner far up the stack.

Prints the number of logs and of errors (in all, with a pg_sched frame, pg_sched's,
PostgreSQL's known ones, others) by kind, and where the others are; writes every error
with its generated suppression to OUT/all_errors.txt, those with a pg_sched frame to
OUT/pg_sched_frames.txt and pg_sched's to OUT/pg_sched_errors.txt.  Exit status 3 if any
error is pg_sched's, 0 otherwise.
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument('logdir')
ap.add_argument('--so', default=None, help='pg_sched.so (default: pg_config --pkglibdir)')
ap.add_argument('--src', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'),
                help='the checkout (for src/*.c and include/*.h)')
ap.add_argument('--out', default=None, help='where to write the error lists (default LOGDIR/..)')
args = ap.parse_args()

so = args.so
if so is None:
    pkglib = subprocess.run(['/usr/lib/postgresql/15/bin/pg_config', '--pkglibdir'],
                            capture_output=True, text=True, check=True).stdout.strip()
    so = os.path.join(pkglib, 'pg_sched.so')
nm = subprocess.run(['nm', '--defined-only', so], capture_output=True, text=True, check=True).stdout
syms = set()
for line in nm.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in ('t', 'T', 'w', 'W'):
        syms.add(parts[2])
files = set(os.path.basename(p) for p in glob.glob(os.path.join(args.src, 'src', '*.c')) +
            glob.glob(os.path.join(args.src, 'include', '*.h')))
if not syms or not files:
    sys.exit('scan_logs.py: no symbols in %s or no sources under %s' % (so, args.src))

# "==PID==" or, with --time-stamp=yes, "==00:00:01:02.345 PID=="
prefix = r'^==[^=]*==\s'
frame = re.compile(prefix + r'\s*(?:at|by) 0x[0-9A-Fa-f]+: (\S+) \((.*)\)\s*$')
noise_obj = re.compile(r'in (/usr/libexec/valgrind/|/usr/lib/x86_64-linux-gnu/libc\.so)')


def ours(line):
    m = frame.match(line)
    if not m:
        return False
    fn, where = m.groups()
    if where.startswith('in ') and where.endswith('/pg_sched.so'):
        return True
    base = os.path.basename(where.rsplit(':', 1)[0])
    return fn in syms and base in files


def where_of(block):
    """The first frame with a name outside Valgrind and libc, in the error's own stack."""
    for line in block[1:]:
        m = frame.match(line)
        if not m:
            if re.match(prefix + r'\s*\S', line) and not re.match(prefix + r'\s*(at|by) ', line):
                break       # the next stack ("Address ...", "Uninitialised value was created")
            continue
        fn, where = m.groups()
        if fn == '???' or noise_obj.search(where) or re.match(r'(fileops|iofwrite|genops|write|pwrite64|'
                                                              r'send|sendto)\.c:', where):
            continue
        return '%s (%s)' % (fn, where)
    return '?'


TOP = 6
known_pg = [
    (re.compile(r'^Syscall param (write|pwrite64)\(buf\) points to uninitialised'),
     re.compile(r': (RelationCacheInitializePhase3|XLogFlush|XLogBackgroundFlush) \(')),
    (re.compile(r'^(Conditional jump or move depends on uninitialised|Use of uninitialised value)'),
     re.compile(r': smgrclosenode \(')),
    (re.compile(r'^Source and destination overlap in memcpy_chk\('),
     re.compile(r': RE_compile_and_cache \(')),
]


def split_stacks(block):
    """The error's own stack (frame lines) and its further stacks, frame lines each."""
    stacks = [[]]
    for line in block[1:]:
        if frame.match(line):
            stacks[-1].append(line)
        elif re.match(prefix + r'\s*\S', line):
            stacks.append([])
    return stacks[0], [l for st in stacks[1:] for l in st]


def known(kind_line, own):
    text = ''.join(own)
    return any(k.search(kind_line) and f.search(text) and
               (f.pattern.find('smgrclosenode') < 0 or 'ReceiveSharedInvalidMessages' in text)
               for k, f in known_pg)


total = 0
kinds = collections.Counter()
frames_blocks = []
known_count = collections.Counter()
ours_kinds = collections.Counter()
others_where = collections.Counter()
ours_blocks = []
all_blocks = []
logs = sorted(glob.glob(os.path.join(args.logdir, '*.log')))
procs_with_errors = 0
for path in logs:
    with open(path, errors='replace') as f:
        lines = f.readlines()
    block = None
    n_here = 0
    for i, line in enumerate(lines):
        if 'VALGRINDERROR-BEGIN' in line:
            block = []
            continue
        if 'VALGRINDERROR-END' in line and block is not None:
            supp = []
            j = i + 1
            if j < len(lines) and lines[j].startswith('{'):
                while j < len(lines):
                    supp.append(lines[j])
                    if lines[j].startswith('}'):
                        break
                    j += 1
            kind = re.sub(prefix, '', block[0]).strip() if block else '?'
            kind = re.sub(r'0x[0-9a-fA-F]+', 'ADDR', kind)
            kind = re.sub(r'\d+', 'N', kind)
            total += 1
            n_here += 1
            kinds[kind] += 1
            entry = '--- %s\n%s%s' % (os.path.basename(path), ''.join(block), ''.join(supp))
            all_blocks.append(entry)
            own, further = split_stacks(block)
            kind_line = re.sub(prefix, '', block[0]).strip() if block else ''
            is_known = known(kind_line, own)
            if any(ours(l) for l in block):
                frames_blocks.append(entry)
            if (any(ours(l) for l in further) or any(ours(l) for l in own[:TOP]) or
                    (any(ours(l) for l in own) and not is_known)):
                ours_kinds[kind] += 1
                ours_blocks.append(entry)
            elif is_known:
                known_count['%s at %s%s' % (kind, where_of(block),
                                            ', pg_sched up the stack' if any(ours(l) for l in own) else '')] += 1
            else:
                others_where['%s at %s' % (kind, where_of(block))] += 1
            block = None
            continue
        if block is not None:
            block.append(line)
    if n_here:
        procs_with_errors += 1

out = args.out or os.path.dirname(os.path.abspath(args.logdir))
with open(os.path.join(out, 'pg_sched_errors.txt'), 'w') as f:
    f.write('\n'.join(ours_blocks))
with open(os.path.join(out, 'all_errors.txt'), 'w') as f:
    f.write('\n'.join(all_blocks))
with open(os.path.join(out, 'pg_sched_frames.txt'), 'w') as f:
    f.write('\n'.join(frames_blocks))
print('valgrind logs (processes): %d' % len(logs))
print('processes with errors:     %d' % procs_with_errors)
print('errors, total:             %d' % total)
for k, v in kinds.most_common():
    print('    %5d  %s' % (v, k))
print('errors with a pg_sched frame: %d' % len(frames_blocks))
print('errors in pg_sched:        %d' % len(ours_blocks))
for k, v in ours_kinds.most_common():
    print('    %5d  %s' % (v, k))
print('PostgreSQL\'s own, known in a Debian build: %d' % sum(known_count.values()))
for k, v in known_count.most_common(15):
    print('    %5d  %s' % (v, k))
print('other errors (no pg_sched frame): %d' % sum(others_where.values()))
for k, v in others_where.most_common(15):
    print('    %5d  %s' % (v, k))
if ours_blocks:
    print('\nfirst errors with a pg_sched frame (all in %s):' % os.path.join(out, 'pg_sched_errors.txt'))
    for b in ours_blocks[:5]:
        print(b)
sys.exit(3 if ours_blocks else 0)
