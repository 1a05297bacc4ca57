#!/usr/bin/env bash
# `make traces`: records the real-program trace library into traces/: gzip
# compressing a file, sqlite3 running a query workload, a python3 script, gcc compiling a C
# file (several processes: fork + exec), and a multithreaded C program. Each trace is then
# checked (`vmmu trace check`: zero references outside a mapping). Inputs are generated here,
# deterministically. Traces are not committed (traces/*.vtrace is ignored).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vmmu="$root/.venv/bin/vmmu"
out="$root/traces"
work="$out/inputs"
mkdir -p "$out" "$work"

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get install -y "$2" >/dev/null || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }
    else
      echo "make traces: $1 is missing; install the package '$2'" >&2
      exit 1
    fi
  fi
}
need gzip gzip
need sqlite3 sqlite3
need gcc gcc

# Deterministic inputs.
python3 - "$work" <<'PY'
import random, sys, pathlib
w = pathlib.Path(sys.argv[1])
rng = random.Random(42)
words = [''.join(rng.choice('etaoinshrdlucmfwyp') for _ in range(rng.randint(2, 9))) for _ in range(5000)]
with open(w / "input.txt", "w") as f:
    for _ in range(25_000):
        f.write(' '.join(rng.choice(words) for _ in range(6)) + '\n')
(w / "hello.c").write_text('#include <stdio.h>\nint main(void){int s=0;for(int i=0;i<100;i++)s+=i;printf("%d\\n",s);return 0;}\n')
(w / "script.py").write_text(
    "d = {}\nfor i in range(60000):\n    d[i % 5003] = d.get(i % 5003, 0) + i\n"
    "print(sum(sorted(d.values())[:100]))\n")
(w / "mt.c").write_text(r'''
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define N 4
#define SZ (1 << 20)
static void *work(void *arg) {
    long id = (long)arg; volatile char *buf = malloc(SZ); long s = 0;
    for (int r = 0; r < 4; r++) for (int i = 0; i < SZ; i += 64) { buf[i] = (char)(i + id); s += buf[i]; }
    free((void *)buf); return (void *)s;
}
int main(void) {
    pthread_t t[N]; long total = 0;
    for (long i = 0; i < N; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < N; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
    printf("%ld\n", total); return 0;
}
''')
PY
gcc -O1 -pthread -o "$work/mt" "$work/mt.c"
py=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
sql="create table t(a integer, b integer, c text);
with recursive n(x) as (select 1 union all select x + 1 from n where x < 30000)
insert into t select x, (x * 7919) % 10007, hex(x * 31) from n;
create index tb on t(b);
select count(*), sum(a) from t where b between 100 and 5000;
select c, count(*) from t group by b % 97 order by 2 desc limit 5;
update t set a = a + 1 where b % 3 = 0;
select avg(a) from t;"

rec() {
  local name=$1; shift
  echo "== $name"
  "$vmmu" record -o "$out/$name.vtrace" "$@" > "$work/$name.stdout"
  "$vmmu" trace check "$out/$name.vtrace"
}
rec gzip -- gzip -c "$work/input.txt"
rec sqlite3 -- sqlite3 :memory: "$sql"
rec python3 -- "$py" "$work/script.py"
rec gcc --follow-children -- gcc -c -o "$work/hello.o" "$work/hello.c"
rec threads -- "$work/mt"
ls -l "$out"/*.vtrace
