# pg_sched — PGXS build.
#
# Newcomer targets (they install what is missing, then build, install and run on a
# throwaway cluster; see test/harness.sh):
#   make demo    the seed's example fleet plus generated nodes, a burst of dispatches
#   make test    every suite: unit (also under ASan/UBSan, and a short fuzz), pg_regress,
#                isolation, pgTAP, pgbench, upgrade, hostile input, e2e, a short soak,
#                Perl TAP (restarts, crashes, failover, the maintenance worker)
#   make deps    only the Debian packages
# Long runs, each on what it starts itself:
#   make soak     16 clients x 120 s of the full mix    make fuzz      libFuzzer, 14M runs
#   make valgrind pg_regress on a server under valgrind make sqlsmith  10 min of sqlsmith

EXTENSION  = pg_sched
EXTVERSION = $(shell sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" $(EXTENSION).control)

MODULE_big = $(EXTENSION)
OBJS       = $(patsubst %.c,%.o,$(wildcard src/*.c))

# The install script of the version in the making is built from one piece per stage,
# sql/install/*.sql, in the order of their names.  The upgrade to it from 0.1.0 is built
# from sql/upgrade/0.1.0--0.2.0.sql (the tables' changes, what goes) followed by the
# pieces written to be run again (CREATE OR REPLACE, and the privileges set from
# scratch).  Released install scripts are files of their own.
INSTALL_PIECES = $(sort $(wildcard sql/install/*.sql))
UPGRADE_PIECES = sql/upgrade/0.1.0--$(EXTVERSION).sql \
                 $(addprefix sql/install/,01_checks.sql 05_who_may.sql 15_fleet_api.sql 21_row_checks.sql 25_work_api.sql \
                                          30_dispatch.sql 50_diagnostics.sql 90_privileges.sql)
DATA_built     = sql/$(EXTENSION)--$(EXTVERSION).sql sql/$(EXTENSION)--0.1.0--$(EXTVERSION).sql
DATA           = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql))

PG_CPPFLAGS = -Iinclude
PG_CFLAGS   = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers

# pg_regress: every sql/*.sql that is not an install or upgrade script.
REGRESS      = $(sort $(filter-out $(EXTENSION)--%,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=$(EXTENSION)

# isolation specs live in test/specs, their expected output in test/expected.
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test --load-extension=$(EXTENSION)

EXTRA_CLEAN = test/unit/test_placement test/unit/fuzz_placement output_iso

# Prefer the PostgreSQL 15 server's pg_config; a fresh machine may not have it yet,
# in which case only the newcomer targets below are defined (they install it).
PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else
all install installcheck:
	@echo "PostgreSQL 15 server development files are missing: run 'make deps' (or 'make test')." >&2
	@exit 1
endif

# PGXS does not track header dependencies: every object depends on every header.
$(OBJS): $(wildcard include/*.h)

sql/$(EXTENSION)--$(EXTVERSION).sql: $(INSTALL_PIECES)
	cat $(INSTALL_PIECES) >$@

sql/$(EXTENSION)--0.1.0--$(EXTVERSION).sql: $(UPGRADE_PIECES)
	cat $(UPGRADE_PIECES) >$@

.PHONY: test demo deps bench unit soak fuzz valgrind sqlsmith
test demo deps bench soak fuzz valgrind sqlsmith:
	@bash test/harness.sh $@

# The pure placement core, outside the server: unit tests (no PostgreSQL needed).
unit: test/unit/test_placement
	./test/unit/test_placement

test/unit/test_placement: test/unit/test_placement.c src/placement.c include/placement.h
	$(CC) -std=c99 -O1 -g -Wall -Wextra -Werror -Wno-missing-field-initializers -Iinclude -o $@ test/unit/test_placement.c src/placement.c
