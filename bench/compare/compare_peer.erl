%% SPDX-License-Identifier: Apache-2.0
%%
%% The server side of compare.escript's remote modes (rtt, stream). The escript compiles this
%% file and loads it into the server node it starts (code:load_binary over distribution), then
%% spawns these processes there.
-module(compare_peer).
-export([ponger/0, sink/1, guard/1]).

%% Answers every {ping, From, N} with {pong, N}.
ponger() ->
    receive
        {ping, From, N} -> From ! {pong, N}, ponger()
    end.

%% Counts {blob, From, Seq, Data} messages and sends {credit, Count} to the sender every Step.
sink(Step) -> sink(Step, 0).

sink(Step, Count) ->
    receive
        {blob, From, _Seq, _Data} ->
            Next = Count + 1,
            case Next rem Step of
                0 -> From ! {credit, Next};
                _ -> ok
            end,
            sink(Step, Next)
    end.

%% Halts this node when Client's node goes down, however the client ended.
guard(Client) ->
    erlang:monitor_node(Client, true),
    receive
        {nodedown, Client} -> erlang:halt()
    end.
