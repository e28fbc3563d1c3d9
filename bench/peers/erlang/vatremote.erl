%% Erlang peer of bench/remote.c: two nodes on 127.0.0.1, a counter
%% gen_server on one, called from the other.
%%
%%   sequential  N gen_server:call's across nodes, one at a time
%%               (round trips/s, p50/p99 latency);
%%   pipelined   P gen_server:send_request's with up to 1,000 outstanding
%%               (calls/s);
%%   casts       P gen_server:cast's across nodes, then one gen_server:call
%%               whose answer must be the count after all of them
%%               (casts/s up to that answer).
%%
%% Run by remote-erl, which starts both nodes:
%%   erl -name S -run vatremote serve
%%   erl -name C -run vatremote main S N P
-module(vatremote).
-behaviour(gen_server).
-export([serve/0, main/1]).
-export([init/1, handle_call/3, handle_cast/2]).

-define(WINDOW, 1000).

%% --- The server ------------------------------------------------------------

serve() ->
    {ok, _} = gen_server:start({local, vatremote_counter}, ?MODULE, 0, []).

init(N) -> {ok, N}.

handle_call({incr, By}, _From, N) -> {reply, N + By, N + By}.

handle_cast({incr, By}, N) -> {noreply, N + By};
handle_cast(stop, N) ->
    spawn(fun() -> timer:sleep(10), init:stop() end),
    {noreply, N}.

%% --- The client ------------------------------------------------------------

main([Node, NArg, PArg]) ->
    Server = {vatremote_counter, list_to_atom(Node)},
    N = list_to_integer(NArg),
    P = list_to_integer(PArg),
    wait_for(Server, mono() + 30000000000),
    Seq = sequential(Server, N),
    Pipe = pipelined(Server, P, N),
    Cast = casts(Server, P, N + P),
    gen_server:cast(Server, stop),
    {SeqSecs, _, _, _} = Seq,
    {PipeSecs, _, _, _} = Pipe,
    io:format("remote: ~b sequential calls in ~.3f s: ~b round trips/s~n",
              [N, SeqSecs, round(N / SeqSecs)]),
    io:format("remote: ~b pipelined calls (~b outstanding) in ~.3f s: ~b calls/s~n",
              [P, ?WINDOW, PipeSecs, round(P / PipeSecs)]),
    {CastSecs, _, _, _} = Cast,
    io:format("remote: ~b casts, then a call, in ~.3f s: ~b casts/s~n",
              [P, CastSecs, round(P / CastSecs)]),
    report(remote_seq, N, Seq),
    report(remote_pipe, P, Pipe),
    report(remote_cast, P, Cast),
    {_, _, _, OkS} = Seq,
    {_, _, _, OkP} = Pipe,
    {_, _, _, OkC} = Cast,
    halt(case OkS andalso OkP andalso OkC of true -> 0; false -> 1 end).

%% The server node may still be starting: ask until it answers.
wait_for({Name, Node} = Server, Deadline) ->
    case rpc:call(Node, erlang, whereis, [Name]) of
        Pid when is_pid(Pid) -> ok;
        _ ->
            case mono() > Deadline of
                true -> io:format(standard_error, "remote: no server~n", []), halt(1);
                false -> timer:sleep(50), wait_for(Server, Deadline)
            end
    end.

mono() -> erlang:monotonic_time(nanosecond).

sequential(Server, N) ->
    T0 = mono(),
    {Lat, Ok} = seq_loop(Server, 1, N, [], true),
    {(mono() - T0) / 1.0e9, Lat, N, Ok}.

seq_loop(_, I, N, Lat, Ok) when I > N -> {Lat, Ok};
seq_loop(Server, I, N, Lat, Ok) ->
    S = mono(),
    V = gen_server:call(Server, {incr, 1}),
    seq_loop(Server, I + 1, N, [mono() - S | Lat], Ok andalso V =:= I).

%% Up to ?WINDOW requests outstanding; each answer sends one more.
pipelined(Server, P, Base) ->
    T0 = mono(),
    First = min(?WINDOW, P),
    Reqs = lists:foldl(fun(_, C) -> send(Server, C) end,
                       gen_server:reqids_new(), lists:seq(1, First)),
    {Lat, Sum, Ok} = pipe_loop(Server, Reqs, First, P, 0, [], 0, true),
    %% The counts Base+1 .. Base+P, each answered once.
    Want = P * (2 * Base + P + 1) div 2,
    {(mono() - T0) / 1.0e9, Lat, P, Ok andalso Sum =:= Want}.

send(Server, Coll) ->
    gen_server:send_request(Server, {incr, 1}, mono(), Coll).

pipe_loop(_, _, _, P, P, Lat, Sum, Ok) -> {Lat, Sum, Ok};
pipe_loop(Server, Reqs, Sent, P, Got, Lat, Sum, Ok) ->
    case gen_server:receive_response(Reqs, infinity, true) of
        {{reply, V}, S, Reqs1} ->
            Now = mono(),
            {Reqs2, Sent2} = case Sent < P of
                                 true -> {send(Server, Reqs1), Sent + 1};
                                 false -> {Reqs1, Sent}
                             end,
            pipe_loop(Server, Reqs2, Sent2, P, Got + 1, [Now - S | Lat], Sum + V, Ok);
        _ ->
            pipe_loop(Server, Reqs, Sent, P, Got + 1, Lat, Sum, false)
    end.

%% One-way: the call after the casts, from the same process to the same
%% server, is handled after them (Erlang keeps the order of messages
%% between two processes), so its answer is the count after all of them.
casts(Server, P, Base) ->
    T0 = mono(),
    cast_loop(Server, P),
    V = gen_server:call(Server, {incr, 0}, infinity),
    {(mono() - T0) / 1.0e9, [0], P, V =:= Base + P}.

cast_loop(_, 0) -> ok;
cast_loop(Server, K) ->
    gen_server:cast(Server, {incr, 1}),
    cast_loop(Server, K - 1).

report(W, N, {Secs, Lat, _, Ok}) ->
    Sorted = lists:sort(Lat),
    Len = length(Sorted),
    Q = fun(F) -> lists:nth(min(Len, 1 + trunc(Len * F)), Sorted) / 1000 end,
    io:format("RESULT workload=~s workers=~b messages=~b seconds=~.3f rate=~b"
              " p50_us=~.1f p99_us=~.1f~s~n",
              [W, erlang:system_info(schedulers_online), N, Secs, round(N / Secs),
               Q(0.5), Q(0.99), case Ok of true -> ""; false -> " ok=0" end]).
