//! An embedder: one rule in text and one in Rust, proven, then a model optimized with them.
//!
//!     cargo run --release --example embed [-- MODEL [OUT]]

use onnx_opt::{Optimizer, RustRule};
use onnx_prove::{render_verdicts, ProveOptions};

const MY_RULES: &str = "# My rules.

# -(a - b) == b - a
rule neg_sub: Neg(Sub(a, b)) => Sub(b, a)
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .unwrap_or("examples/models/negations.onnxtxt".into());
    let out = args.next().unwrap_or("/tmp/negations-opt.onnx".into());

    // (-a) * (-b) == a * b, with the right side built in Rust.
    let neg_times_neg = RustRule::new("neg_times_neg", "Mul(Neg(a), Neg(b))", |rhs| {
        let (Some(a), Some(b)) = (rhs.var("a"), rhs.var("b")) else {
            return Ok(None);
        };
        rhs.op("Mul").inputs(&[a, b]).build().map(Some)
    })
    .tags("exact");
    let optimizer = Optimizer::new()
        .rules_text("my.rules", MY_RULES)
        .rust_rule(neg_times_neg);

    let options = ProveOptions::default();
    let verdicts = onnx_prove::prove_added_rules(&optimizer, &options)?;
    print!("{}", render_verdicts(&verdicts, &options));
    if !verdicts.iter().all(|v| v.passed(&options)) {
        return Err("a rule failed its proof".into());
    }

    let optimized = optimizer.optimize(&onnx_opt::load(&model)?)?;
    let r = &optimized.report;
    println!("{model}: {} nodes -> {}", r.nodes_before, r.nodes_after);
    for (rule, n) in r.egraph.main.phases.iter().flat_map(|p| &p.firings) {
        println!("  {rule} fired {n} time(s)");
    }
    onnx_opt::save(&optimized.model, &out)?;
    println!("wrote {out}");
    Ok(())
}
