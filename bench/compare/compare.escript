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
%%   compare.escript skynet [LEAVES]   the classic skynet: a root spawns 10 children, each as many,
%%                                   down to LEAVES leaves; each sends the sum of its leaves'
%%                                   ordinals to its parent and ends. ms from the root's spawn to
%%                                   its sum.
%%   compare.escript pingpong [N]      a pinger sends {ping, self(), N} to a ponger, which answers
%%                                   {pong, N}, N times one after another. Round trips/s.
%%   compare.escript ring [HOPS]       a ring of 1,000 processes passes one {token, Hops} message on
%%                                   HOPS times. Hops/s.
%%   compare.escript rtt [N]           distributed Erlang, two nodes: this script becomes node
%%                                   compare_client_<pid>@localhost, starts a second VM
%%                                   (erl -sname compare_server_<pid>@localhost) listening on
%%                                   127.0.0.1 only, loads compare_peer.erl (beside this script)
%%                                   into it and spawns its ponger there; 1,000 untimed round
%%                                   trips of {ping, self(), N} -> {pong, N}, then N timed ones.
%%                                   Mean µs. Needs a running epmd (run.sh starts its own, on a
%%                                   free port given as ERL_EPMD_PORT).
%%   compare.escript stream [EVENTS] [BODY]  the same two nodes: a sender streams EVENTS
%%                                   {blob, self(), Seq, Data} messages with a BODY-byte binary to
%%                                   compare_peer's sink, at most W = clamp(8 MiB / BODY, 64,
%%                                   16384) ahead of the {credit, Count} messages the sink sends
%%                                   back every W/16 (troupe_remote's window). EVENTS is rounded up
%%                                   to a multiple of W/16; an untimed stream of 4 W first.
%%                                   events/s and GB/s.
%% The server VM is ended by PID when the script is done, and halts by itself when the client's
%% node goes down (compare_peer:guard) or never connects within 30 s.
%%
%% Sizes default to the full ones of run.sh; smaller values are for a quick check. Each mode
%% prints one line of key=value pairs that run.sh reads.
-mode(compile).

-define(SENDERS, 4).

main(["fanin"]) -> fanin(10000000);
main(["fanin", N]) -> fanin(list_to_integer(N));
main(["idle"]) -> idle(1000000);
main(["idle", N]) -> idle(list_to_integer(N));
main(["skynet"]) -> skynet(1000000);
main(["skynet", N]) -> skynet(list_to_integer(N));
main(["pingpong"]) -> pingpong(2000000);
main(["pingpong", N]) -> pingpong(list_to_integer(N));
main(["ring"]) -> ring(10000000);
main(["ring", N]) -> ring(list_to_integer(N));
main(["rtt"]) -> rtt(20000);
main(["rtt", N]) -> rtt(list_to_integer(N));
main(["stream"]) -> stream(1000000, 64);
main(["stream", N]) -> stream(list_to_integer(N), 64);
main(["stream", N, Body]) -> stream(list_to_integer(N), list_to_integer(Body));
main(_) ->
    io:format(standard_error, "usage: compare.escript fanin [EVENTS] | idle [ACTORS] | skynet [LEAVES]"
              " | pingpong [N] | ring [HOPS] | rtt [N] | stream [EVENTS] [BODY]~n", []),
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

%% ---- skynet ----------------------------------------------------------------------------------

skynet(Leaves) ->
    T0 = now_ns(),
    Main = self(),
    spawn(fun() -> skynet(Main, 0, Leaves) end),
    Sum = receive {sum, S} -> S after 120000 -> error(skynet_timeout) end,
    Ms = (now_ns() - T0) / 1.0e6,
    Sum = Leaves * (Leaves - 1) div 2,
    Actors = skynet_actors(Leaves),
    io:format("skynet leaves=~b actors=~b ms=~.1f actors_per_s=~b~n",
              [Leaves, Actors, Ms, round(Actors / (Ms / 1000))]).

skynet(Parent, First, 1) -> Parent ! {sum, First};
skynet(Parent, First, Size) ->
    Part = Size div 10,
    Self = self(),
    [spawn(fun() -> skynet(Self, First + I * Part, Part) end) || I <- lists:seq(0, 9)],
    Parent ! {sum, skynet_collect(10, 0)}.

skynet_collect(0, Sum) -> Sum;
skynet_collect(N, Sum) -> receive {sum, S} -> skynet_collect(N - 1, Sum + S) end.

skynet_actors(0) -> 0;
skynet_actors(Level) -> Level + skynet_actors(Level div 10).

%% ---- ping-pong -------------------------------------------------------------------------------

pingpong(N) ->
    Ponger = spawn(fun ponger/0),
    Seconds = time_pinger(Ponger, N),
    exit(Ponger, kill),
    io:format("pingpong round_trips=~b seconds=~.4f rt_per_s=~b~n", [N, Seconds, round(N / Seconds)]).

ponger() -> receive {ping, From, N} -> From ! {pong, N}, ponger() end.

%% Makes N round trips to Ponger (local or remote) one after another; returns the seconds.
time_pinger(Ponger, N) ->
    Main = self(),
    T0 = now_ns(),
    spawn(fun() -> Ponger ! {ping, self(), N}, pinger(Ponger, Main) end),
    receive pinger_done -> ok after 120000 -> error(pingpong_timeout) end,
    (now_ns() - T0) / 1.0e9.

pinger(Ponger, Main) ->
    receive
        {pong, 1} -> Main ! pinger_done;
        {pong, N} -> Ponger ! {ping, self(), N - 1}, pinger(Ponger, Main)
    end.

%% ---- ring ------------------------------------------------------------------------------------

ring(Hops) ->
    Main = self(),
    Members = [spawn(fun() -> receive {next, Next} -> ring_member(Next, Main) end end)
               || _ <- lists:seq(1, 1000)],
    [First | Rest] = Members,
    [M ! {next, Next} || {M, Next} <- lists:zip(Members, Rest ++ [First])],
    T0 = now_ns(),
    First ! {token, Hops - 1},
    receive ring_done -> ok after 120000 -> error(ring_timeout) end,
    Seconds = (now_ns() - T0) / 1.0e9,
    [exit(M, kill) || M <- Members],
    io:format("ring actors=1000 hops=~b seconds=~.4f hops_per_s=~b~n",
              [Hops, Seconds, round(Hops / Seconds)]).

ring_member(Next, Main) ->
    receive
        {token, 0} -> Main ! ring_done, ring_member(Next, Main);
        {token, H} -> Next ! {token, H - 1}, ring_member(Next, Main)
    end.

%% ---- remote: two distributed Erlang nodes ---------------------------------------------------

rtt(N) ->
    {Server, Cleanup} = start_server(),
    Ponger = spawn(Server, compare_peer, ponger, []),
    time_pinger(Ponger, 1000),
    Seconds = time_pinger(Ponger, N),
    io:format("rtt round_trips=~b seconds=~.4f rtt_us=~.2f~n", [N, Seconds, Seconds * 1.0e6 / N]),
    Cleanup().

stream(Events0, Body) ->
    Window = max(64, min(16384, (8 bsl 20) div Body)),
    Step = Window div 16,
    Events = (Events0 + Step - 1) div Step * Step,
    {Server, Cleanup} = start_server(),
    Sink = spawn(Server, compare_peer, sink, [Step]),
    Payload = binary:copy(<<"p">>, Body),
    stream_once(Sink, 4 * Window, Payload, Window, 0),
    Seconds = stream_once(Sink, Events, Payload, Window, 4 * Window),
    Rate = Events / Seconds,
    io:format("stream events=~b body=~b seconds=~.4f events_per_s=~b gb_per_s=~.3f~n",
              [Events, Body, Seconds, round(Rate), Rate * Body / 1.0e9]),
    Cleanup().

%% Streams Count blobs to Sink within Window of its credits (Base counted before); the seconds.
stream_once(Sink, Count, Payload, Window, Base) ->
    Main = self(),
    T0 = now_ns(),
    spawn(fun() -> stream_send(Sink, Count, Payload, Window, Base, 0, 0, Main) end),
    receive stream_done -> ok after 120000 -> error(stream_timeout) end,
    (now_ns() - T0) / 1.0e9.

stream_send(Sink, Count, Payload, Window, Base, Sent, Credited, Main) ->
    Sent1 = stream_fill(Sink, Count, Payload, Window, Sent, Credited),
    receive
        {credit, Total} when Total - Base >= Count -> Main ! stream_done;
        {credit, Total} -> stream_send(Sink, Count, Payload, Window, Base, Sent1, Total - Base, Main)
    end.

stream_fill(Sink, Count, Payload, Window, Sent, Credited)
  when Sent < Count, Sent - Credited < Window ->
    Sink ! {blob, self(), Sent + 1, Payload},
    stream_fill(Sink, Count, Payload, Window, Sent + 1, Credited);
stream_fill(_Sink, _Count, _Payload, _Window, Sent, _Credited) -> Sent.

%% Makes this VM a distributed node on 127.0.0.1, starts the server VM, loads compare_peer into
%% it and returns its node name and a fun that ends it (by its OS pid if it does not halt).
start_server() ->
    Id = os:getpid(),
    Cookie = list_to_atom("compare_" ++ Id),
    ok = application:set_env(kernel, inet_dist_use_interface, {127, 0, 0, 1}),
    case net_kernel:start([list_to_atom("compare_client_" ++ Id ++ "@localhost"), shortnames]) of
        {ok, _} -> ok;
        {error, Reason} ->
            io:format(standard_error, "cannot start distribution (is epmd running?): ~p~n",
                      [Reason]),
            halt(1)
    end,
    erlang:set_cookie(node(), Cookie),
    ServerName = "compare_server_" ++ Id ++ "@localhost",
    Server = list_to_atom(ServerName),
    Erl = os:find_executable("erl"),
    Port = open_port({spawn_executable, Erl},
                     [{args, ["-sname", ServerName, "-setcookie", atom_to_list(Cookie),
                              "-noshell", "-noinput", "-start_epmd", "false",
                              "-kernel", "inet_dist_use_interface", "{127,0,0,1}",
                              "-eval", "spawn(fun() -> timer:sleep(30000), "
                                       "case nodes() of [] -> halt(); _ -> ok end end)"]},
                      exit_status]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    wait_for_node(Server, 600),
    Source = filename:join(filename:dirname(escript:script_name()), "compare_peer.erl"),
    {ok, Module, Bin} = compile:file(Source, [binary, report]),
    {module, Module} = rpc:call(Server, code, load_binary, [Module, Source, Bin]),
    spawn(Server, compare_peer, guard, [node()]),
    Cleanup = fun() ->
                  rpc:cast(Server, erlang, halt, []),
                  receive {Port, {exit_status, _}} -> ok
                  after 5000 -> os:cmd("kill -9 " ++ integer_to_list(OsPid))
                  end
              end,
    {Server, Cleanup}.

%% Pings Node every 50 ms until it answers, at most Tries times.
wait_for_node(Node, 0) -> error({no_answer_from, Node});
wait_for_node(Node, Tries) ->
    case net_adm:ping(Node) of
        pong -> ok;
        pang -> timer:sleep(50), wait_for_node(Node, Tries - 1)
    end.
