//! An embedder: one rule in text and one in Rust, proven, then a model optimized with them.
//!
//!     cargo run --release --example embed [-- MODEL [OUT]]

use onnx_opt::prove::{render_verdicts, ProveOptions};
use onnx_opt::{Optimizer, RustRule};

const MY_RULES: &str = "# My rules.

# -(-x) == x
rule neg_neg [exact]: Neg(Neg(x)) => x
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or("examples/models/negations.onnxtxt".into());
    let out = args.next().unwrap_or("/tmp/negations-opt.onnx".into());

    // x - (-y) == x + y, with the right side built in Rust.
    let sub_neg = RustRule::new("sub_neg_to_add", "Sub(x, Neg(y))", |rhs| {
        let (Some(x), Some(y)) = (rhs.var("x"), rhs.var("y")) else {
            return Ok(None);
        };
        rhs.op("Add").inputs(&[x, y]).build().map(Some)
    })
    .tags("exact");
    let optimizer = Optimizer::new()
        .rules_text("my.rules", MY_RULES)
        .rust_rule(sub_neg);

    let options = ProveOptions::default();
    let verdicts = optimizer.prove_added_rules(&options)?;
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
