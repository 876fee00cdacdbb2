//! The answerer over stdio, and a driver that calls a stdio program
//! directly: what a stdio upstream costs without a gateway in front.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Answer, Answers};

/// Answer each line of stdin on stdout: a result on one line, an event
/// stream's messages one line each.
pub fn serve(answers: &Answers) {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() || !line.contains("\"method\"") || !line.contains("\"id\"") {
            continue;
        }
        let written = match answers.answer(line.as_bytes()) {
            Answer::Json(b) => out.write_all(&b).and_then(|()| out.write_all(b"\n")),
            Answer::Events(events) => events.iter().try_for_each(|e| {
                let data = e.strip_prefix(b"event: message\ndata: ").unwrap_or(e);
                out.write_all(data.trim_ascii_end())
                    .and_then(|()| out.write_all(b"\n"))
            }),
        };
        if written.and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"get_room","arguments":{"room_id":"atrium"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// `--drive SECONDS PROCESSES CLK_TCK -- program args...`: PROCESSES
/// copies of the program, each called by a thread of its own, one request
/// in flight each (as the gateway calls a program), for SECONDS. Prints
/// one `WRKRESULT` line as bench/wrk's scripts do, plus the CPU ticks of
/// this driver and of the programs.
pub fn drive(args: &[String]) {
    let usage = "usage: bench-upstream --drive SECONDS PROCESSES CLK_TCK -- program [args...]";
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(seconds), Some(processes), Some(_hz)) = (num(0), num(1), num(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(program) = args.iter().position(|a| a == "--").map(|i| &args[i + 1..]) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let until = Instant::now() + Duration::from_secs(seconds);
    let runs: Vec<_> = (0..processes)
        .map(|_| {
            let program = program.to_vec();
            std::thread::spawn(move || one_process(&program, until))
        })
        .collect();
    let mut latencies = Vec::new();
    let (mut bytes, mut prog_ticks) = (0u64, (0u64, 0u64));
    for r in runs {
        let Ok(Some(run)) = r.join() else {
            eprintln!("a driven program failed");
            std::process::exit(1);
        };
        latencies.extend(run.latencies);
        bytes += run.bytes;
        prog_ticks = (prog_ticks.0 + run.ticks.0, prog_ticks.1 + run.ticks.1);
    }
    latencies.sort_unstable();
    let n = latencies.len().max(1);
    let at = |q: f64| {
        latencies
            .get(((n as f64 * q) as usize).min(n - 1))
            .copied()
            .unwrap_or(0)
    };
    let own = ticks_of("self");
    println!(
        "WRKRESULT requests={} rps={:.0} p50_us={} p99_us={} bytes={} connect=0 read=0 write=0 status=0 timeout=0 other=0 driver_user_ticks={} driver_sys_ticks={} program_user_ticks={} program_sys_ticks={}",
        latencies.len(),
        latencies.len() as f64 / seconds as f64,
        at(0.5),
        at(0.99),
        bytes,
        own.0,
        own.1,
        prog_ticks.0,
        prog_ticks.1
    );
}

struct Run {
    latencies: Vec<u64>,
    bytes: u64,
    ticks: (u64, u64),
}

fn one_process(program: &[String], until: Instant) -> Option<Run> {
    let mut child = Command::new(&program[0])
        .args(&program[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let mut stdout = BufReader::new(child.stdout.take()?);
    let mut run = Run {
        latencies: Vec::new(),
        bytes: 0,
        ticks: (0, 0),
    };
    let mut line = String::new();
    let mut id = 0u64;
    while Instant::now() < until {
        id += 1;
        let sent = Instant::now();
        let call = CALL.replace("ID", &id.to_string());
        stdin.write_all(call.as_bytes()).ok()?;
        stdin.write_all(b"\n").ok()?;
        stdin.flush().ok()?;
        line.clear();
        stdout.read_line(&mut line).ok()?;
        if !line.contains("\"seats\":24") {
            return None;
        }
        run.latencies.push(sent.elapsed().as_micros() as u64);
        run.bytes += line.len() as u64;
    }
    run.ticks = ticks_of(&child.id().to_string());
    drop(stdin);
    let _ = child.wait();
    Some(run)
}

/// utime and stime (clock ticks) of `/proc/<pid>/stat` ("self" for this
/// process).
fn ticks_of(pid: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(") ").map_or("", |(_, a)| a);
    let f: Vec<&str> = after.split(' ').collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
    (n(11), n(12))
}
