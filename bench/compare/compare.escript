#!/usr/bin/env escript
%% SPDX-License-Identifier: Apache-2.0
%%! +P 2000000
%%
%% Erlang/OTP 25 side of the peer comparison in bench/README.md (actors_bench). It measures, with
%% the default VM settings (one scheduler per core), the same workloads as Troupe's
%% BM_FanInUnbounded and BM_Spawn, so that the table's Erlang column can be re-measured. The one
%% flag on the line above, +P 2000000, raises the process limit (default 262,144), without which
%% 1,000,000 processes cannot be alive at once; it changes nothing else.
%%
%%   compare.escript fanin [EVENTS]  4 sender processes each send EVENTS/4 small integers, as fast
%%                                   as they can and with no flow control, to 1 receiver that
%%                                   counts them. Prints events/s (EVENTS / wall time from the
%%                                   first send to the receiver counting the last) and the peak
%%                                   RSS growth in MiB.
%%   compare.escript idle [ACTORS]   spawns ACTORS processes that just wait for a message, waits
%%                                   until the run queues are empty, and prints (RSS after - RSS
%%                                   before) / ACTORS.
%%
%% Memory is the OS resident set size of the beam process (/proc/self/statm read by the VM
%% itself, which is the beam's own OS process), so that it is comparable with the C++ figures;
%% erlang:memory(total) is printed beside it for reference only. The BEAM has no malloc_trim:
%% before each reading the calling process is garbage-collected, nothing more. The peak is
%% sampled every 10 ms by a separate Erlang process at high priority.
%%
%% EVENTS defaults to 10,000,000 and ACTORS to 1,000,000; smaller values are for a quick check.
%% Each mode prints one line of key=value pairs that run.sh reads.
-mode(compile).

-define(SENDERS, 4).

main(["fanin"]) -> fanin(10000000);
main(["fanin", N]) -> fanin(list_to_integer(N));
main(["idle"]) -> idle(1000000);
main(["idle", N]) -> idle(list_to_integer(N));
main(_) ->
    io:format(standard_error, "usage: compare.escript fanin [EVENTS] | idle [ACTORS]~n", []),
    halt(2).

%% Resident set size of this VM in bytes, from /proc/self/statm (second field, in pages).
rss() ->
    {ok, Bin} = file:read_file("/proc/self/statm"),
    [_Size, Resident | _] = string:lexemes(binary_to_list(Bin), " \n"),
    list_to_integer(Resident) * page_size().

page_size() ->
    case persistent_term:get({?MODULE, page_size}, undefined) of
        undefined ->
            Size = list_to_integer(string:trim(os:cmd("getconf PAGESIZE"))),
            persistent_term:put({?MODULE, page_size}, Size),
            Size;
        Size ->
            Size
    end.

now_ns() -> erlang:monotonic_time(nanosecond).

%% ---- fan-in ----------------------------------------------------------------------------------

fanin(Events) ->
    PerSender = Events div ?SENDERS,
    Total = PerSender * ?SENDERS,
    _ = page_size(),
    erlang:garbage_collect(),
    RssBefore = rss(),
    MemBefore = erlang:memory(total),
    Sampler = spawn_opt(fun() -> sample(RssBefore, MemBefore) end, [{priority, high}]),
    Main = self(),
    Receiver = spawn(fun() -> count(Total, Main) end),
    Senders = [spawn(fun() -> send_all(Receiver, PerSender, Main) end)
               || _ <- lists:seq(1, ?SENDERS)],
    Starts = [receive {started, S, T} -> T end || S <- Senders],
    End = receive {done, T1} -> T1 after 120000 -> error(fanin_timeout) end,
    Sampler ! {stop, self()},
    {PeakRss, PeakMem} = receive {peak, R, M} -> {R, M} end,
    Seconds = (End - lists:min(Starts)) / 1.0e9,
    io:format("fanin events=~b seconds=~.4f events_per_s=~b peak_rss_growth_mib=~.1f"
              " peak_erlang_memory_growth_mib=~.1f~n",
              [Total, Seconds, round(Total / Seconds), (PeakRss - RssBefore) / 1048576,
               (PeakMem - MemBefore) / 1048576]).

%% Tells main when the first message leaves, then sends Count small integers.
send_all(Receiver, Count, Main) ->
    Main ! {started, self(), now_ns()},
    send_loop(Receiver, Count).

send_loop(_Receiver, 0) -> ok;
send_loop(Receiver, N) ->
    Receiver ! (N band 16#ffff),
    send_loop(Receiver, N - 1).

%% Counts messages until Left reaches 0, then reports the time to main.
count(0, Main) -> Main ! {done, now_ns()};
count(Left, Main) ->
    receive _ -> count(Left - 1, Main) end.

%% Keeps the highest RSS and erlang:memory(total) seen, every 10 ms, until told to stop.
sample(PeakRss, PeakMem) ->
    Rss = max(PeakRss, rss()),
    Mem = max(PeakMem, erlang:memory(total)),
    receive
        {stop, From} -> From ! {peak, max(Rss, rss()), max(Mem, erlang:memory(total))}
    after 10 ->
        sample(Rss, Mem)
    end.

%% ---- idle processes --------------------------------------------------------------------------

idle(Actors) ->
    _ = page_size(),
    erlang:garbage_collect(),
    RssBefore = rss(),
    MemBefore = erlang:memory(total),
    T0 = now_ns(),
    spawn_idle(Actors),
    wait_quiet(6000),
    SpawnSeconds = (now_ns() - T0) / 1.0e9,
    erlang:garbage_collect(),
    RssAfter = rss(),
    MemAfter = erlang:memory(total),
    io:format("idle actors=~b spawn_seconds=~.3f rss_growth_mib=~.1f bytes_per_actor=~b"
              " erlang_memory_bytes_per_actor=~b processes=~b~n",
              [Actors, SpawnSeconds, (RssAfter - RssBefore) / 1048576,
               round((RssAfter - RssBefore) / Actors), round((MemAfter - MemBefore) / Actors),
               erlang:system_info(process_count)]).

%% Spawns N processes that each wait for one message. The pids are not kept: an Erlang process
%% stays alive without anyone referring to it.
spawn_idle(0) -> ok;
spawn_idle(N) ->
    spawn(fun() -> receive _ -> ok end end),
    spawn_idle(N - 1).

%% Waits until every spawned process has run to its receive (empty run queues), checking every
%% 10 ms, at most Tries times.
wait_quiet(0) -> ok;
wait_quiet(Tries) ->
    case erlang:statistics(total_run_queue_lengths_all) of
        0 -> ok;
        _ -> timer:sleep(10), wait_quiet(Tries - 1)
    end.
