/*
 * lease.pml — the lease protocol of one Docket job, as its SQL carries it out, for spin.
 *
 * One job row; three slots (0 and 1 are two slots of worker A, 2 is worker B: a stale slot of
 * a worker that holds the job again is the hard case for a fence), a reaper, and the
 * database's clock. Each slot claims, then heartbeats, completes, fails, snoozes, gives a
 * buffered job back (release), records a memoized step, or crashes — in any order, at any
 * time, stale or not: the database's guards alone decide what is accepted. Which SQL each
 * step stands for: docs/guarantees.md, "The lease protocol, model-checked".
 *
 * Configurations (cpp, -D...):
 *   (default)  PostgreSQL: the claim, the reap and every fenced write are one statement each
 *              (claim.sql, reap.sql, the *_fenced() SQL functions).
 *   TWO_STEP   MariaDB / MySQL (docket-local over docket-mysql's SQL): the claim is a plain
 *              read, then the chosen row locked FOR UPDATE SKIP LOCKED and re-checked, then the
 *              update; the reaper reads its `now` first, then locks and re-checks expired rows,
 *              then ends the attempt with the attempt it locked as the fence. A crash between
 *              the steps rolls the transaction back. One reaper; with TWO_REAPERS, two.
 *
 * Broken variants (each must yield a counterexample naming the property it breaks):
 *   BROKEN_NO_TOKEN       completion checks owner and lease, not the attempt    stale_token_wrote
 *   BROKEN_REAP_LIVE      the reaper takes leases that have not expired         two_leases_held
 *   BROKEN_HB_REVIVE      a heartbeat extends a lease that already expired      write_outside_lease
 *   BROKEN_LATE_COMPLETE  completion without the lease check                    write_outside_lease
 *   BROKEN_STEP_NO_FENCE  a step is recorded by any holder of the row's owner   stale_token_wrote
 *   BROKEN_RELEASE_NO_FENCE  a snooze or the buffer's give-back checks the owner
 *                         only                                                  stale_token_wrote
 *   BROKEN_NO_RECHECK     (TWO_STEP) the lock and the update do not re-check the
 *                         state a plain read saw: a two-step claim taken as one  two_leases_held
 *   BROKEN_REAP_UNFENCED  (TWO_STEP, TWO_REAPERS) the reaper reads without the row
 *                         lock and ends the attempt without the fence: two
 *                         reapers end one attempt twice                         second_terminal_write
 *   BROKEN_PARK_NO_FENCE  (PARKS) a park checks the owner, not the attempt       stale_token_wrote
 *   BROKEN_PARK_BLIND     (PARKS) a park does not look for a signal already sent lost_wakeup
 *   BROKEN_PARK_OLD_SNAPSHOT (PARKS) a park reads the signals before it locks the
 *                         row (one statement, its snapshot older than the lock)  lost_wakeup
 *   BROKEN_SIGNAL_NO_WAKE (PARKS) a signal does not wake the job parked on it    lost_wakeup
 *
 *   BROKEN_UNBLOCK_STALE  (CHILD) a completion refused by its fence still resolves
 *                         the job's edge to its child                           early_child
 *   BROKEN_DOUBLE_UNBLOCK (CHILD) resolving an edge does not check it is still
 *                         waiting: a parent that ends twice (dead, retried,
 *                         succeeded) consumes it twice                          edge_twice
 *
 * CHILD makes the job a workflow parent with one child on a `cancel` edge (migration 0030,
 * workflow_resolve(); docket-local's workflow::resolve): the write that ends the job —
 * fenced completion, a final failure, the reaper's dead end — consumes the edge in the same
 * step (satisfied: the child pending; failed: the child cancelled), an operator may cancel
 * the waiting child at any time, and may retry the job once after it ended dead.
 *
 * PARKS adds a job waiting for a signal: a slot that holds the job may park it (fenced like
 * a snooze; park_many.sql, park_fenced() / step_fence.sql + park.sql: the row locked first,
 * then the signals read), a sender sends the signal once at any time (signal(): the row
 * locked first, the signal kept, a parked job woken), and the wait may time out.
 *
 * Properties (ghost flags; each assert names one):
 *   two_leases_held        no two slots hold unexpired leases of the job at once
 *   write_outside_lease    every accepted write of an attempt falls inside the lease the
 *                          database granted that attempt
 *   stale_token_wrote      a superseded token (attempt) never writes
 *   second_terminal_write  at most one write ends an attempt (complete, fail, snooze,
 *                          release, reap)
 *   job_lost               at the end, the job is not left running on an expired lease
 *   lost_wakeup            (PARKS) never is the job parked, not due, while its signal is
 *                          there: whichever of park and signal comes second sees the other
 *   early_child            (CHILD) the child is never claimable unless the job succeeded
 *   edge_twice             (CHILD) the edge is consumed at most once
 */

#define L      2    /* lease length, in ticks of the database clock */
#define MAXT   5    /* the clock's last tick */
#define MAXR   2    /* max_attempts: runs after which a failure is final */
#define NSLOT  3
#define CLAIMS 2    /* claims per slot of worker A (B makes one): bounds the attempts */
#define NATT   8    /* > NSLOT * CLAIMS */
#ifdef TWO_STEP
#define REAP_LAG 1
#else
#define REAP_LAG 0
#endif
/* Two reapers: leadership is a lease too, so a paused leader may sweep beside its successor.
   TWO_STEP alone checks one (12 M states); TWO_STEP with TWO_REAPERS is 40 M states and
   about 80 s (scripts/model-check.sh runs it with MODEL_FULL=1). */
#if defined(TWO_STEP) && !defined(TWO_REAPERS)
#define REAPERS 1
#else
#define REAPERS 2
#endif

mtype = { pending, running, succeeded, dead };

/* the row */
mtype state = pending;
byte attempt = 0;       /* the fencing token: raised by every claim, never lowered */
byte released = 0;      /* claims given back unrun (release, snooze): runs = attempt - released */
byte owner = 0;         /* 0: none; 1: worker A; 2: worker B */
byte lease = 0;         /* lease_expires_at */
byte lockby = 0;        /* 0: no row lock; else the tag of the transaction holding it */
byte now = 0;           /* the database's clock */

/* ghosts */
byte granted[NSLOT];    /* the lease expiry the database granted the slot's attempt; 0: none */
byte tok[NSLOT];        /* the attempt the slot holds */
byte ends[NATT];        /* writes that ended each attempt */
byte finished = 0;      /* slots that have stopped */
byte reapers_done = 0;
bool two_leases_held, write_outside_lease, stale_token_wrote, second_terminal_write, job_lost;

#ifdef PARKS
bool sig = false;       /* job_signals: the signal's row */
bool parked = false;    /* pending and not due: waiting for the signal (run_at = now + delay) */
bool sent = false;      /* ghost: the sender has sent (or been refused) */
bool lost_wakeup;
#define CLAIMABLE (state == pending && !parked)
#else
#define CLAIMABLE (state == pending)
#endif

#ifdef CHILD
byte edge = 0;          /* job_deps.state: 0 waiting, 1 satisfied, 2 failed */
byte consumed = 0;      /* ghost: times the edge was consumed */
byte child = 0;         /* the child: 0 waiting, 1 pending (claimable), 2 cancelled */
byte extra = 0;         /* attempts an operator's retry added */
bool early_child, edge_twice;
#define BUDGET (MAXR + extra)
/* workflow_resolve(): the job just reached `st` in this same step. */
inline resolve(st) {
    if
#ifdef BROKEN_DOUBLE_UNBLOCK
    :: st == succeeded || st == dead ->
#else
    :: edge == 0 && (st == succeeded || st == dead) ->
#endif
        consumed++;
        edge_twice = edge_twice || (consumed > 1);
        assert(!edge_twice);
        if
        :: st == succeeded -> edge = 1; if :: child == 0 -> child = 1 :: else -> skip fi
        :: else -> edge = 2; if :: child == 0 -> child = 2 :: else -> skip fi
        fi
    :: else -> skip
    fi;
    early_child = early_child || (child == 1 && state != succeeded);
    assert(!early_child)
}
#else
#define BUDGET MAXR
inline resolve(st) { skip }
#endif

#define OWNER(s) ((s) < 2 -> 1 : 2)
#define HOLDS(s) (owner == OWNER(s) && attempt == tok[s])
#define LIVE     (state == running && lease > now)

#ifdef BROKEN_NO_TOKEN
#define COMPLETE_OK(s) (owner == OWNER(s) && LIVE)
#elif defined(BROKEN_LATE_COMPLETE)
#define COMPLETE_OK(s) (HOLDS(s) && state == running)
#else
#define COMPLETE_OK(s) (HOLDS(s) && LIVE)
#endif
#ifdef BROKEN_HB_REVIVE
#define HEARTBEAT_OK(s) (HOLDS(s) && state == running)
#else
#define HEARTBEAT_OK(s) (HOLDS(s) && LIVE)
#endif
#ifdef BROKEN_STEP_NO_FENCE
#define STEP_OK(s) (owner == OWNER(s) && LIVE)
#else
#define STEP_OK(s) (HOLDS(s) && LIVE)
#endif
#ifdef BROKEN_PARK_NO_FENCE
#define PARK_OK(s) (owner == OWNER(s) && LIVE)
#else
#define PARK_OK(s) (HOLDS(s) && LIVE)
#endif
#ifdef BROKEN_RELEASE_NO_FENCE
#define RELEASE_OK(s) (owner == OWNER(s) && LIVE)
#else
#define RELEASE_OK(s) (HOLDS(s) && LIVE)
#endif

/* The database accepted a write of slot s's attempt: the spec's checks. */
inline accepted(s) {
    stale_token_wrote = stale_token_wrote || (tok[s] != attempt);
    assert(!stale_token_wrote);
    write_outside_lease = write_outside_lease || (now >= granted[s]);
    assert(!write_outside_lease)
}

#ifdef PARKS
/* After every write of the signal or the park. */
inline no_lost_wakeup() {
    lost_wakeup = lost_wakeup || (parked && sig);
    assert(!lost_wakeup)
}
#endif

/* A write that ends the attempt `a`. */
inline ended(a) {
    ends[a]++;
    second_terminal_write = second_terminal_write || (ends[a] > 1);
    assert(!second_terminal_write)
}

/* Slot s was just granted a lease: nobody else may hold an unexpired one. */
inline granted_to(s) {
    granted[s] = lease;
    tok[s] = attempt;
    j = 0;
    do
    :: j < NSLOT ->
        two_leases_held = two_leases_held || (j != s && granted[j] > now);
        j++
    :: else -> break
    od;
    assert(!two_leases_held)
}

/* claim.sql (PostgreSQL) / candidates + candidates_lock + claim_lease (MariaDB). */
inline claim(s, ok) {
    ok = false;
#ifndef TWO_STEP
    atomic {
        if
        :: CLAIMABLE && lockby == 0 ->
            state = running; attempt++; owner = OWNER(s); lease = now + L;
            granted_to(s); ok = true
        :: else -> skip
        fi
    }
#else
    atomic { seen = (CLAIMABLE) }                      /* plain read, no lock */
    if
    :: seen ->
        atomic {                                               /* FOR UPDATE SKIP LOCKED */
            if
#ifdef BROKEN_NO_RECHECK
            :: lockby == 0 -> lockby = s + 1
#else
            :: lockby == 0 && CLAIMABLE -> lockby = s + 1
#endif
            :: else -> seen = false
            fi
        }
        if
        :: seen ->
            if
            :: atomic {                                         /* claim_lease, commit */
#ifdef BROKEN_NO_RECHECK
                   state = running; attempt++; owner = OWNER(s); lease = now + L;
                   lockby = 0; granted_to(s); ok = true
#else
                   if
                   :: CLAIMABLE ->
                       state = running; attempt++; owner = OWNER(s); lease = now + L;
                       granted_to(s); ok = true
                   :: else -> skip
                   fi;
                   lockby = 0
#endif
               }
            :: atomic { lockby = 0 }                            /* crash: rolled back */
            fi
        :: else -> skip
        fi
    :: else -> skip
    fi
#endif
}

proctype slot(byte s; byte maxclaims) {
    byte claims = 0, j;
    bool ok, seen;
#ifdef PARKS
    bool psig;
#endif
    do
    :: claims < maxclaims ->
        claim(s, ok);
        claims++;
        if
        :: ok ->
            do
            /* heartbeat.sql / fenced_select + heartbeat_apply */
            :: atomic { lockby == 0;
                        if
                        :: HEARTBEAT_OK(s) -> accepted(s); lease = now + L; granted[s] = lease
                        :: else -> skip
                        fi }
            /* record_steps.sql / step_fence + step_insert: memoized steps */
            :: atomic { lockby == 0;
                        if
                        :: STEP_OK(s) -> accepted(s)    /* the step row is written */
                        :: else -> skip
                        fi }
            /* complete_many.sql / complete_apply */
            :: atomic { lockby == 0;
                        if
                        :: COMPLETE_OK(s) -> accepted(s); ended(tok[s]);
                           state = succeeded; owner = 0; granted[s] = 0; resolve(succeeded)
                        :: else -> granted[s] = 0
#ifdef BROKEN_UNBLOCK_STALE
                           ; resolve(succeeded)
#endif
                        fi }; break
            /* fail_many.sql / fenced_row + finish_attempt: retry or dead */
            :: atomic { lockby == 0;
                        if
                        :: HOLDS(s) && LIVE -> accepted(s); ended(tok[s]);
                           state = (attempt - released >= BUDGET -> dead : pending);
                           owner = 0; granted[s] = 0; resolve(state)
                        :: else -> granted[s] = 0
                        fi }; break
            /* snooze_many.sql: a snooze, or the prefetch buffer giving a job back unrun:
               pending again, the run given back (one statement for both) */
            :: atomic { lockby == 0;
                        if
                        :: RELEASE_OK(s) -> accepted(s); ended(tok[s]);
                           state = pending; released++; owner = 0; granted[s] = 0
                        :: else -> granted[s] = 0
                        fi }; break
#ifdef PARKS
            /* park_many.sql: park_fenced() locks the row, then a second statement (a new
               snapshot) decides; on MariaDB step_fence.sql locks, then park.sql. Due at once
               when the signal is there, else after the wait's delay. The wait step is
               recorded before, as any step above. */
            ::
#ifdef BROKEN_PARK_OLD_SNAPSHOT
               atomic { psig = sig };                 /* read before the lock */
#endif
               atomic { lockby == 0; lockby = 4 + s };
               atomic {
#ifndef BROKEN_PARK_OLD_SNAPSHOT
                   psig = sig;
#endif
                   if
                   :: PARK_OK(s) -> accepted(s); ended(tok[s]);
                      state = pending; released++; owner = 0; granted[s] = 0;
#ifdef BROKEN_PARK_BLIND
                      parked = true
#else
                      parked = !psig
#endif
                   :: else -> granted[s] = 0
                   fi;
                   lockby = 0;
                   psig = false;
                   no_lost_wakeup()
               }; break
#endif
            /* crash (kill -9, lost connection): the lease is left to expire */
            :: break
            od
        :: else -> skip
        fi;
        ok = false; seen = false
    :: else -> break
    od;
    finished++
}

/* reap.sql / reap_expired: expired leases back to pending, or dead once runs are spent. */
inline reap_once() {
#ifndef TWO_STEP
    atomic {
        if
#ifdef BROKEN_REAP_LIVE
        :: state == running && lockby == 0 ->
#else
        :: state == running && lease < now && lockby == 0 ->
#endif
            ended(attempt);
            state = (attempt - released >= BUDGET -> dead : pending); owner = 0; resolve(state)
        :: else -> skip
        fi
    }
#else
    seen = 0;
    atomic {                                                   /* now.sql, reap_expired.sql */
        rnow = now - (now > 0 -> 1 : 0);     /* a `now` read a tick before the lock, or not */
        if
#ifdef BROKEN_REAP_UNFENCED
        :: state == running && lease < rnow -> seen = attempt  /* no lock taken */
#elif defined(BROKEN_REAP_LIVE)
        :: state == running && lockby == 0 -> seen = attempt; lockby = 8 + _pid
#else
        :: state == running && lease < rnow && lockby == 0 -> seen = attempt; lockby = 8 + _pid
#endif
        :: else -> skip
        fi
    }
    if
    :: seen > 0 ->
        atomic {                                               /* finish_attempt.sql */
#ifdef BROKEN_REAP_UNFENCED
            ended(seen);
            state = (seen - released >= BUDGET -> dead : pending); owner = 0
#else
            if
            :: state == running && attempt == seen ->
                ended(seen);
                state = (attempt - released >= BUDGET -> dead : pending); owner = 0;
                resolve(state)
            :: else -> skip
            fi;
            lockby = 0
#endif
        }
    :: else -> skip
    fi;
    rnow = 0; seen = 0
#endif
}

active [REAPERS] proctype reaper() {
    byte rnow, seen, j;
    do
    :: reap_once()
    :: finished == NSLOT && now == MAXT -> break
    od;
    /* nothing lost: each reaper sweeps once more; after the last one, the job is not left
       running on a lease that had expired by the sweep's own `now` (one tick behind the
       clock on TWO_STEP) */
    reap_once();
    atomic {
        reapers_done++;
        if
        :: reapers_done == REAPERS ->
            job_lost = (state == running && lease + REAP_LAG < now);
            assert(!job_lost)
        :: else -> skip
        fi
    }
}

#ifdef PARKS
/* signal.sql / signal(): locks the job's row, refuses a finished job, keeps the signal and
   wakes the job if it is parked on it; sent once, at any time. The wait's time-out makes
   a parked job due at any time too. */
active proctype sender() {
    do
    :: atomic { !sent && lockby == 0 ->
           sent = true;
           if
           :: state == pending || state == running ->
               sig = true;
#ifndef BROKEN_SIGNAL_NO_WAKE
               parked = false;
#endif
               skip
           :: else -> skip
           fi;
           no_lost_wakeup()
       }
    :: atomic { parked -> parked = false }             /* the wait timed out */
    :: finished == NSLOT -> break
    od
}
#endif

#ifdef CHILD
/* cancel_job() on the waiting child, and retry_job() on the job once it ended dead (one
   more run allowed); each takes the row's lock like any write. */
active proctype operator() {
    bool retried = false;
    do
    :: atomic { child == 0 -> child = 2 }
    :: atomic { !retried && state == dead && lockby == 0 ->
           retried = true; extra++; state = pending }
    :: finished == NSLOT -> break
    od
}
#endif

active proctype clock() {
    do
    :: now < MAXT -> now++
    :: else -> break
    od
}

init {
    atomic {
        run slot(0, CLAIMS);
        run slot(1, CLAIMS);
        run slot(2, 1)      /* worker B: one claim (the state space stays small) */
    }
}
