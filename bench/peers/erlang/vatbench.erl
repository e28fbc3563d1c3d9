%% Erlang peer of the libvat benchmark suite: plain processes and messages.
%% Run as: erl -noshell +S W:W -run vatbench main WORKLOAD -extra [-h] [SIZES...]
-module(vatbench).
-export([main/1]).

sizes(ring) -> [{"N", 1000000}, {"M", 200}];
sizes(counter) -> [{"K", 3000000}];
sizes(fanin) -> [{"P", 4}, {"K", 1000000}];
sizes(selfsend) -> [{"A", 8}, {"K", 10000000}];
sizes(skynet) -> [{"L", 1000000}];
sizes(chain) -> [{"N", 100000}];
sizes(pingpong) -> [{"R", 1000000}];
sizes(spawn) -> [{"N", 1000000}];
sizes(flood) -> [{"N", 10000000}].

main([Name]) ->
    W = list_to_atom(Name),
    Args = init:get_plain_arguments(),
    Defs = sizes(W),
    case parse(Args, Defs) of
        {ok, Sizes} -> run(W, Sizes);
        help -> usage(W, 0);
        error -> usage(W, 2)
    end.

parse(["-h" | _], _) -> help;
parse(["--help" | _], _) -> help;
parse(Args, Defs) when length(Args) > length(Defs) -> error;
parse(Args, Defs) ->
    try [positive(A) || A <- Args] of
        Vs -> {ok, Vs ++ [D || {_, D} <- lists:nthtail(length(Vs), Defs)]}
    catch _:_ -> error
    end.

positive(S) -> V = list_to_integer(S), true = V > 0, V.

usage(W, Code) ->
    io:format("usage: ~s [-w W] ~s~n  -w W  scheduler threads (erl +S W:W), default all cores~n",
              [W, lists:join(" ", [N || {N, _} <- sizes(W)])]),
    [io:format("  ~s     default ~b~n", [N, D]) || {N, D} <- sizes(W)],
    halt(Code).

mono() -> erlang:monotonic_time(nanosecond).
secs(T0) -> (mono() - T0) / 1.0e9.

%% report(Workload, Messages | none, Seconds, Setup | none, Ok)
report(W, Msgs, Secs, Setup, Ok) ->
    Keys = [io_lib:format("workload=~s workers=~b", [W, erlang:system_info(schedulers_online)])]
        ++ [io_lib:format(" messages=~b", [Msgs]) || Msgs =/= none]
        ++ [io_lib:format(" seconds=~.6f", [Secs])]
        ++ [io_lib:format(" rate=~b", [round(Msgs / Secs)]) || Msgs =/= none, Secs > 0]
        ++ [io_lib:format(" setup_seconds=~.6f", [Setup]) || Setup =/= none]
        ++ [" ok=0" || not Ok],
    io:format("RESULT ~s~n", [Keys]),
    halt(case Ok of true -> 0; false -> 1 end).

%% ring N M ------------------------------------------------------------------
run(ring, [N, M]) when M > N -> io:format("ring: M must not exceed N~n"), usage(ring, 2);
run(ring, [N, M]) ->
    Self = self(),
    Step = N div M,
    T0 = mono(),
    First = spawn(fun() -> receive {next, Next} -> node(Next, N, Self) end end),
    {Second, Entries} = build(N - 1, First, Step, M, N, Self, []),
    First ! {next, Second},
    Setup = secs(T0),
    io:format("ring: ~b processes spawned in ~.3f s~n", [N, Setup]),
    T1 = mono(),
    Int = os:getenv("VATPEER_ERL_TOKEN") =/= "tuple",
    lists:foreach(fun({J, P}) -> P ! token(Int, J, 0) end, [{0, First} | Entries]),
    Hops = [receive {done, J, H} -> {J, H} end || _ <- lists:seq(1, M)],
    Secs = secs(T1),
    Ok = lists:sort(Hops) =:= [{J, N} || J <- lists:seq(0, M - 1)],
    io:format("ring: ~b tokens x ~b hops in ~.3f s~n", [M, N, Secs]),
    report(ring, N * M, Secs, Setup, Ok);

%% counter K -----------------------------------------------------------------
run(counter, [K]) ->
    %% Off-heap: a mailbox that grows to millions of messages is not
    %% copied by each garbage collection of the process that owns it.
    C = spawn_opt(fun() -> counter(0) end, [{message_queue_data, mqd(off_heap)}]),
    T0 = mono(),
    adds(C, K, window(256), 0),
    C ! {get, self()},
    Count = receive {count, V} -> V end,
    Secs = secs(T0),
    io:format("counter: ~b adds, count ~b~n", [K, Count]),
    report(counter, K, Secs, none, Count =:= 100 * K);

%% fanin P K -----------------------------------------------------------------
run(fanin, [P, K]) ->
    Self = self(),
    W = window(256),
    T0 = mono(),
    %% The consumer: a process of its own, or (VATPEER_FANIN_DRIVER=1) the
    %% driver itself.
    C = case os:getenv("VATPEER_FANIN_DRIVER") of
            "1" ->
                process_flag(message_queue_data, mqd(off_heap)),
                Self;
            _ ->
                spawn_opt(fun() -> Self ! {fanin, consume(P * K, 0, 0)} end,
                          [{message_queue_data, mqd(off_heap)}])
        end,
    [spawn(fun() -> produce(C, 1, K, W, 0) end) || _ <- lists:seq(1, P)],
    {Count, Sum} = case C of
                       Self -> consume(P * K, 0, 0);
                       _ -> receive {fanin, CS} -> CS end
                   end,
    Secs = secs(T0),
    io:format("fanin: ~b messages, sum ~b~n", [Count, Sum]),
    report(fanin, P * K, Secs, none, Sum =:= P * K * (K + 1) div 2);

%% selfsend A K --------------------------------------------------------------
run(selfsend, [A, K]) ->
    Self = self(),
    T0 = mono(),
    [spawn(fun() -> self() ! {msg, 0}, selfloop(Self, K, 0) end) || _ <- lists:seq(1, A)],
    Total = lists:sum([receive {received, R} -> R end || _ <- lists:seq(1, A)]),
    Secs = secs(T0),
    io:format("selfsend: ~b processes, ~b messages~n", [A, Total]),
    report(selfsend, A * K, Secs, none, Total =:= A * K);

%% skynet --------------------------------------------------------------------
run(skynet, [L]) ->
    case power_of_ten(L) of
        false -> io:format("skynet: L must be a power of ten~n"), usage(skynet, 2);
        true -> ok
    end,
    Self = self(),
    T0 = mono(),
    spawn_opt(fun() -> skynet(Self, 0, L) end, spawn_opts()),
    Sum = receive {sum, S} -> S end,
    Secs = secs(T0),
    io:format("skynet: sum ~b in ~.3f s~n", [Sum, Secs]),
    report(skynet, (10 * L - 1) div 9, Secs, none, Sum =:= L * (L - 1) div 2);

%% chain N -------------------------------------------------------------------
run(chain, [N]) ->
    Self = self(),
    T0 = mono(),
    First = spawn(fun() -> link_next(Self, N - 1), receive die -> exit(boom) end end),
    Last = receive {last, L} -> L end,
    Ref = monitor(process, Last),
    Setup = secs(T0),
    io:format("chain: ~b processes spawned in ~.3f s~n", [N, Setup]),
    T1 = mono(),
    First ! die,
    Reason = receive {'DOWN', Ref, process, _, R} -> R end,
    Secs = secs(T1),
    io:format("chain: last of ~b dead (~p) after ~.3f s~n", [N, Reason, Secs]),
    report(chain, N, Secs, Setup, Reason =:= boom);

%% pingpong R ----------------------------------------------------------------
run(pingpong, [R]) ->
    Pong = spawn(fun pong/0),
    T0 = mono(),
    V = ping(Pong, R, 0),
    Secs = secs(T0),
    io:format("pingpong: ~b round trips~n", [V]),
    report(pingpong, R, Secs, none, V =:= R);

%% spawn N -------------------------------------------------------------------
run(spawn, [N]) ->
    %% A million `gone` messages queue up while this process still spawns.
    process_flag(message_queue_data, off_heap),
    Self = self(),
    T0 = mono(),
    spawn_n(Self, N),
    await_n(N),
    Secs = secs(T0),
    io:format("spawn: ~b processes gone in ~.3f s~n", [N, Secs]),
    report(spawn, N, Secs, none, true);

%% flood N -------------------------------------------------------------------
run(flood, [N]) ->
    Self = self(),
    {ConsumerOpts, ProducerOpts} = flood_opts(),
    T0 = mono(),
    C = spawn_opt(fun() -> flood_consume(Self, N, 0, 0, 0) end, ConsumerOpts),
    spawn_opt(fun() -> produce(C, 1, N) end, ProducerOpts),
    {Count, Sum, Digest} = receive {flood, Cn, S, D} -> {Cn, S, D} end,
    Secs = secs(T0),
    io:format("flood: ~b messages, sum ~b, digest ~8.16.0b~n", [Count, Sum, Digest]),
    report(flood, N, Secs, none, Count =:= N andalso Sum =:= N * (N + 1) div 2).

%% Spawns processes N-1 down to 1, each holding its successor; keeps those
%% where a token is injected (every Step-th, M in all, index 0 is First).
build(0, Next, _, _, _, _, Acc) -> {Next, Acc};
build(I, Next, Step, M, N, D, Acc) ->
    P = spawn(fun() -> node(Next, N, D) end),
    Acc1 = case I rem Step =:= 0 andalso I div Step < M of
               true -> [{I div Step, P} | Acc];
               false -> Acc
           end,
    build(I - 1, P, Step, M, N, D, Acc1).

%% A token is one integer, id << 32 bor hops: a small integer is sent as
%% it is, where a tuple is built and copied into the receiver's heap at each
%% hop (the ring ran 1.1-1.2x slower with {tok, Id, Hops}, README.md).
%% VATPEER_ERL_TOKEN=tuple sends the tuple.
token(true, J, H) -> J bsl 32 bor H;
token(false, J, H) -> {tok, J, H}.

node(Next, N, D) ->
    receive
        T when is_integer(T), T band 16#FFFFFFFF =:= N -> D ! {done, T bsr 32, N};
        T when is_integer(T) -> Next ! T + 1;
        {tok, J, N} -> D ! {done, J, N};
        {tok, J, H} -> Next ! {tok, J, H + 1}
    end,
    node(Next, N, D).

counter(S) ->
    receive
        {add, X} -> counter(S + X);
        {sync, From} -> From ! synced, counter(S);
        {get, From} -> From ! {count, S}, counter(S)
    end.

%% Flow control (VATPEER_WINDOW=W, 0: none): after each window of W
%% messages the sender asks the receiver to confirm, and before it sends the
%% window after the next one it waits for that confirmation, so at most 2W
%% are in flight, as libvat's counter and fanin do. 256, the default, was
%% as fast as none on one scheduler and up to 2x faster on two, where the
%% receiver's mailbox otherwise grows while both run (README.md).
window(Def) ->
    case os:getenv("VATPEER_WINDOW") of false -> Def; V -> list_to_integer(V) end.

adds(_, 0, _, _) -> ok;
adds(C, K, 0, _) -> C ! {add, 100}, adds(C, K - 1, 0, 0);
adds(C, K, W, Out) ->
    N = min(W, K),
    send_adds(C, N),
    sync(C, Out),
    adds(C, K - N, W, 1).

send_adds(_, 0) -> ok;
send_adds(C, N) -> C ! {add, 100}, send_adds(C, N - 1).

%% Asks To for a confirmation; waits for the previous one, if any.
sync(To, Out) ->
    To ! {sync, self()},
    case Out of
        0 -> ok;
        _ -> receive synced -> ok end
    end.

produce(_, I, K) when I > K -> ok;
produce(To, I, K) -> To ! {item, I}, produce(To, I + 1, K).

%% fanin's producers send bare integers: a small integer is copied as it
%% is, where {item, I} is built on the producer's heap and copied into a
%% heap fragment of the receiver's for every message (1.7-1.9x slower,
%% README.md).
produce(_, I, K, _, _) when I > K -> ok;
produce(To, I, K, 0, _) -> To ! I, produce(To, I + 1, K, 0, 0);
produce(To, I, K, W, Out) ->
    Last = min(I + W - 1, K),
    items(To, I, Last),
    sync(To, Out),
    produce(To, Last + 1, K, W, 1).

items(_, I, Last) when I > Last -> ok;
items(To, I, Last) -> To ! I, items(To, I + 1, Last).

consume(0, C, S) -> {C, S};
consume(Left, C, S) ->
    receive
        I when is_integer(I) -> consume(Left - 1, C + 1, S + I);
        {sync, From} -> From ! synced, consume(Left, C, S)
    end.

selfloop(D, K, K) -> D ! {received, K};
selfloop(D, K, R) ->
    receive {msg, V} -> self() ! {msg, V + 1} end,
    selfloop(D, K, R + 1).

skynet(Parent, Num, 1) -> Parent ! {sum, Num};
skynet(Parent, Num, Size) ->
    Self = self(),
    Step = Size div 10,
    Opts = spawn_opts(),
    [spawn_opt(fun() -> skynet(Self, Num + I * Step, Step) end, Opts) || I <- lists:seq(0, 9)],
    Parent ! {sum, lists:sum([receive {sum, S} -> S end || _ <- lists:seq(1, 10)])}.

%% Each process spawns (linked) the rest of the chain; the last reports itself.
link_next(D, 0) -> D ! {last, self()};
link_next(D, Left) ->
    spawn_link(fun() -> link_next(D, Left - 1), receive after infinity -> ok end end).

pong() -> receive {ping, From, V} -> From ! {pong, V}, pong(); stop -> ok end.

ping(Pong, 0, V) -> Pong ! stop, V;
ping(Pong, R, V) -> Pong ! {ping, self(), V}, receive {pong, V} -> ping(Pong, R - 1, V + 1) end.

%% The consumer's options: where its mailbox lives and the priorities of
%% both processes. The defaults are the fastest of the sweep in README.md:
%% the consumer at high priority runs whenever it has messages, so on one
%% scheduler its queue stays short. VATPEER_FLOOD_MQD (on_heap | off_heap),
%% VATPEER_FLOOD_CPRIO and VATPEER_FLOOD_PPRIO (low | normal | high)
%% override them for sweeps.
flood_opts() ->
    Env = fun(Var, Def) -> case os:getenv(Var) of false -> Def; V -> list_to_atom(V) end end,
    Mqd = Env("VATPEER_FLOOD_MQD", on_heap),
    {[{message_queue_data, Mqd}, {priority, Env("VATPEER_FLOOD_CPRIO", high)}],
     [{priority, Env("VATPEER_FLOOD_PPRIO", normal)}]}.

flood_consume(D, 0, C, S, Dg) -> D ! {flood, C, S, Dg};
flood_consume(D, Left, C, S, Dg) ->
    receive
        {item, I} -> flood_consume(D, Left - 1, C + 1, S + I, Dg bxor flood_work(I band 16#FFFFFFFF, 28))
    end.

%% The same work as every flood program: 28 rounds of xorshift32 (13, 17,
%% 5); every intermediate stays a small integer (below 2^45).
flood_work(X, 0) -> X;
flood_work(X0, R) ->
    X1 = X0 bxor ((X0 bsl 13) band 16#FFFFFFFF),
    X2 = X1 bxor (X1 bsr 17),
    X3 = X2 bxor ((X2 bsl 5) band 16#FFFFFFFF),
    flood_work(X3, R - 1).

power_of_ten(1) -> true;
power_of_ten(L) when L rem 10 =:= 0 -> power_of_ten(L div 10);
power_of_ten(_) -> false.

%% Knobs for the sweeps in README.md: VATPEER_ERL_MIN_HEAP (words, the
%% spawned processes' min_heap_size; unset: the default) and
%% VATPEER_ERL_MQD (on_heap | off_heap, the many-to-one receivers' mailbox).
spawn_opts() ->
    case os:getenv("VATPEER_ERL_MIN_HEAP") of
        false -> [];
        V -> [{min_heap_size, list_to_integer(V)}]
    end.

mqd(Def) ->
    case os:getenv("VATPEER_ERL_MQD") of false -> Def; V -> list_to_atom(V) end.

spawn_n(_, 0) -> ok;
spawn_n(D, N) -> spawn(fun() -> D ! gone end), spawn_n(D, N - 1).

await_n(0) -> ok;
await_n(N) -> receive gone -> await_n(N - 1) end.
