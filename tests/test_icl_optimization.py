"""ICL's optimisation: the inner-step rules (paper vs the reference's batch ratio), the first-order meta step against
a hand-unrolled float64 two-step reference, and the DDPG learning-rate agent (a 1-D bandit whose reward peaks at a
chosen learning rate, the replay buffer, and the reward timing of the loss-driven agent)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from flax import nnx

from bcjax.contrastive import (
  AgentConfig,
  Transitions,
  ddpg,
  first_order_meta_gradient,
  inner_step_count,
  learning_rate_agent,
  replay_add,
  replay_buffer,
  replay_sample,
  sgd_step,
)
from tests._tolerance import assert_close


class InnerStepTest(parameterized.TestCase):
  @parameterized.parameters((0.1, 9), (0.3, 3), (0.4, 2), (0.5, 1), (0.7, 1), (0.9, 1))
  def test_paper_rule(self, alpha, expected):
    self.assertEqual(inner_step_count(alpha), expected)

  def test_batch_ratio_rule_matches_the_reference_table(self):
    self.assertEqual(inner_step_count(0.3, rule="batch-ratio", old_batches=25, new_batches=11), 2)  # PROTEINS
    self.assertEqual(inner_step_count(0.7, rule="batch-ratio", old_batches=11, new_batches=25), 1)
    with self.assertRaisesRegex(ValueError, "old_batches"):
      inner_step_count(0.3, rule="batch-ratio")
    with self.assertRaisesRegex(ValueError, "rule"):
      inner_step_count(0.3, rule="magic")
    with self.assertRaisesRegex(ValueError, "alpha"):
      inner_step_count(1.0)


def quadratic(a, b):
  """(θ, aux, batch) -> (½‖Aθ − b·batch‖², aux + 1): aux counts the calls, as BatchNorm statistics would change."""

  def loss(params, aux, batch):
    r = a @ params["w"] - b * batch
    return 0.5 * jnp.sum(r * r), aux + 1

  return loss


class MetaStepTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_equals_a_hand_unrolled_two_step_reference(self):
    rng = np.random.default_rng(0)
    a_s, b_s = rng.normal(size=(4, 3)), rng.normal(size=4)
    a_q, b_q = rng.normal(size=(5, 3)), rng.normal(size=5)
    theta = rng.normal(size=3)
    lr_s = (0.05, 0.02)
    out = first_order_meta_gradient(
      quadratic(jnp.asarray(a_s), jnp.asarray(b_s)),
      quadratic(jnp.asarray(a_q), jnp.asarray(b_q)),
      {"w": jnp.asarray(theta)},
      0,
      (1.0, 2.0),
      1.0,
      lr_s,
    )
    # by hand: θ1 = θ − lr1 Aᵀ(Aθ − b), θ2 = θ1 − lr2 Aᵀ(Aθ1 − 2b); gradient of the query loss at θ2
    t1 = theta - lr_s[0] * a_s.T @ (a_s @ theta - b_s)
    t2 = t1 - lr_s[1] * a_s.T @ (a_s @ t1 - 2 * b_s)
    assert_close(np.asarray(out.fast_params["w"]), t2)
    assert_close(np.asarray(out.grads["w"]), a_q.T @ (a_q @ t2 - b_q))
    assert_close(float(out.query_loss), 0.5 * np.sum((a_q @ t2 - b_q) ** 2))
    assert_close(
      [float(v) for v in out.support_losses],
      [0.5 * np.sum((a_s @ theta - b_s) ** 2), 0.5 * np.sum((a_s @ t1 - 2 * b_s) ** 2)],
    )
    self.assertEqual(int(out.aux), 3)  # two support calls and one query call threaded the state

  @pytest.mark.heavy
  def test_jit_matches_eager_and_bad_rates(self):
    loss = quadratic(jnp.eye(3), jnp.ones(3))
    params = {"w": jnp.arange(3.0)}
    eager = first_order_meta_gradient(loss, loss, params, 0, (1.0, 1.0, 1.0), 0.5, 0.1)
    jitted = jax.jit(lambda p: first_order_meta_gradient(loss, loss, p, 0, (1.0, 1.0, 1.0), 0.5, 0.1))(params)
    assert_close(np.asarray(eager.grads["w"]), np.asarray(jitted.grads["w"]))
    with self.assertRaisesRegex(ValueError, "learning rates"):
      first_order_meta_gradient(loss, loss, params, 0, (1.0, 1.0), 0.5, [0.1])

  def test_rates_chosen_from_each_support_loss_and_compiled_steps(self):
    """A rate callable sees each step's support loss (as the learned-rate agent does) and gets the hand-unrolled
    result; compiled differentiation and a custom update give the same numbers, one dispatch per step."""
    rng = np.random.default_rng(1)
    a_s, b_s, a_q, b_q = rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=(5, 3)), rng.normal(size=5)
    theta = rng.normal(size=3)
    seen = []

    def rate(step, loss):
      seen.append((step, float(loss)))
      return 0.1 / (1.0 + float(loss))  # depends on the loss, so a wrong loss gives a wrong θ'

    compiled, calls = {}, []

    def value_and_grad(fn):
      compiled.setdefault(fn, jax.jit(jax.value_and_grad(fn, has_aux=True)))
      return lambda *args: (calls.append(fn), compiled[fn](*args))[1]

    support, query = quadratic(jnp.asarray(a_s), jnp.asarray(b_s)), quadratic(jnp.asarray(a_q), jnp.asarray(b_q))
    out = first_order_meta_gradient(
      support,
      query,
      {"w": jnp.asarray(theta)},
      0,
      (1.0, 2.0),
      1.0,
      rate,
      value_and_grad=value_and_grad,
      update=jax.jit(sgd_step),
    )
    l1 = 0.5 * np.sum((a_s @ theta - b_s) ** 2)
    t1 = theta - 0.1 / (1 + l1) * a_s.T @ (a_s @ theta - b_s)
    l2 = 0.5 * np.sum((a_s @ t1 - 2 * b_s) ** 2)
    t2 = t1 - 0.1 / (1 + l2) * a_s.T @ (a_s @ t1 - 2 * b_s)
    self.assertEqual([s for s, _ in seen], [0, 1])
    assert_close([v for _, v in seen], [l1, l2])
    assert_close(np.asarray(out.fast_params["w"]), t2)
    assert_close(np.asarray(out.grads["w"]), a_q.T @ (a_q @ t2 - b_q))
    self.assertEqual(calls, [support, support, query])

  def test_stacked_supports_scan_with_a_functional_rate_equal_the_unrolled_reference(self):
    """Stacked support batches run as one scan; a functional rate (state, step, loss) -> (lr, state) sees each
    step's loss and threads its state, as a learning-rate agent does: the float64 hand-unrolled result, jitted."""
    rng = np.random.default_rng(2)
    a_s, b_s, a_q, b_q = rng.normal(size=(4, 3)), rng.normal(size=4), rng.normal(size=(5, 3)), rng.normal(size=5)
    theta = rng.normal(size=3)
    support, query = quadratic(jnp.asarray(a_s), jnp.asarray(b_s)), quadratic(jnp.asarray(a_q), jnp.asarray(b_q))

    def rate(state, step, loss):  # the rate depends on the state, the step and the loss; the state counts losses
      return 0.1 / (1.0 + loss + state + step), state + loss

    out = jax.jit(
      lambda p: first_order_meta_gradient(
        support, query, p, 0, jnp.array([1.0, 2.0, -1.0]), 1.0, rate, stacked=True, rate_state=jnp.float64(0.5)
      )
    )({"w": theta})
    t, state, losses = theta, 0.5, []
    for step, scale in enumerate((1.0, 2.0, -1.0)):
      loss = 0.5 * np.sum((a_s @ t - scale * b_s) ** 2)
      lr, state = 0.1 / (1.0 + loss + state + step), state + loss
      t = t - lr * a_s.T @ (a_s @ t - scale * b_s)
      losses.append(loss)
    assert_close(np.asarray(out.support_losses), losses)
    assert_close(np.asarray(out.fast_params["w"]), t)
    assert_close(np.asarray(out.grads["w"]), a_q.T @ (a_q @ t - b_q))
    assert_close(float(out.rate_state), state)
    self.assertEqual(int(out.aux), 4)
    fixed = first_order_meta_gradient(
      support, query, {"w": theta}, 0, jnp.array([1.0, 2.0]), 1.0, (0.05, 0.02), stacked=True
    )
    unrolled = first_order_meta_gradient(support, query, {"w": theta}, 0, (1.0, 2.0), 1.0, (0.05, 0.02))
    assert_close(np.asarray(fixed.fast_params["w"]), np.asarray(unrolled.fast_params["w"]))
    with self.assertRaisesRegex(ValueError, "rate_state"):
      first_order_meta_gradient(support, query, {"w": theta}, 0, jnp.ones(2), 1.0, lambda s, l: 0.1, stacked=True)

  def test_sgd_step(self):
    assert_close(np.asarray(sgd_step({"w": jnp.arange(3.0)}, {"w": jnp.ones(3)}, 0.5)["w"]), [-0.5, 0.5, 1.5])


def critic_mse_float64(critic_params, batch) -> float:
  """The critic's MSE against y = r for terminal transitions (d = 1), in float64 NumPy: (s ‖ u) → 10 → 10 → 1 with
  LeakyReLU(0.01)."""
  leaky = lambda h: np.where(h > 0, h, 0.01 * h)
  h = np.concatenate([batch.state, batch.action[:, None]], axis=1)
  for layer in ("l1", "l2", "l3"):
    h = h @ critic_params[layer]["kernel"] + critic_params[layer]["bias"]
    if layer != "l3":
      h = leaky(h)
  return float(np.mean((h[:, 0] - batch.reward) ** 2))


def as_float64(state) -> dict:
  return jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.to_pure_dict(state))


class AgentTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_learns_a_bandit_whose_reward_peaks_at_a_chosen_rate(self):
    """1500 act/remember/learn rounds as one jitted scan: the policy's rate ends within 0.01 of the best one."""
    config = AgentConfig(window=4, actor_learning_rate=1e-4, critic_learning_rate=1e-3, warmup=50, buffer_size=2000)
    agent = ddpg(config)
    observation = jnp.array([0.5, 0.4, 0.3, 0.2], jnp.float32)
    best = 0.03  # the learning rate with the highest reward
    rate = lambda u: config.lr_min + u * (config.lr_max - config.lr_min)

    def round_(state, key):
      k_act, k_learn = jax.random.split(key)
      action, state = agent.act(state, observation, k_act)
      reward = -10.0 * ((rate(action) - best) / config.lr_max) ** 2
      state = agent.remember(state, Transitions(observation, action, reward, observation, jnp.float32(1.0)))
      state, metrics = agent.learn(state, k_learn)
      return state, metrics["learned"]

    state = agent.init(jax.random.key(0))
    start = abs(float(rate(agent.policy(state, observation))) - best)
    state, learned = jax.jit(lambda s: jax.lax.scan(round_, s, jax.random.split(jax.random.key(1), 1500)))(state)
    self.assertEqual(int(np.sum(learned)), 1500 - config.warmup)  # no update before the warm-up ends
    self.assertEqual(int(state.buffer.size), 1500)
    learnt = float(rate(agent.policy(state, observation)))
    self.assertLess(abs(learnt - best), 0.01, f"policy rate {learnt}, initially {start} from the optimum")

  @pytest.mark.heavy
  def test_reference_layer_norm_makes_the_actor_ignore_its_input(self):
    agent = ddpg(AgentConfig(window=4, actor_layer_norm=True))
    state = agent.init(jax.random.key(1))
    outputs = {round(float(agent.policy(state, jnp.full(4, v))), 6) for v in (0.0, 1.0, 5.0)}
    self.assertEqual(outputs, {0.5})  # sigmoid(β = 0), whatever the state
    varied = ddpg(AgentConfig(window=4))
    state = varied.init(jax.random.key(1))
    self.assertGreater(len({round(float(varied.policy(state, jnp.full(4, v))), 6) for v in (0.0, 1.0, 5.0)}), 1)

  @pytest.mark.heavy
  def test_loss_agent_pairs_each_rate_with_the_next_decrement(self):
    config = AgentConfig(window=3, warmup=2, batch_size=2, buffer_size=10)
    agent = learning_rate_agent(config)
    observe = jax.jit(agent.observe)
    state = agent.init(jax.random.key(2), initial_loss=9.0)
    rates, learned = [], []
    for i, loss in enumerate([5.0, 4.0, 4.5, 3.0]):
      rate, state, metrics = observe(state, loss, jax.random.key(10 + i))
      rates.append(float(rate))
      learned.append(bool(metrics["learned"]))
      assert_close(np.float32(rate), np.float32(agent.learning_rate(metrics["action"])), "elementwise")
    self.assertTrue(all(config.lr_min <= r <= config.lr_max for r in rates))
    # nothing to reward at first; no update until more than `warmup` (2) actions were taken
    self.assertEqual(learned, [False, False, False, True])
    buf = state.ddpg.buffer
    self.assertEqual(int(buf.size), 3)
    assert_close(np.asarray(buf.data.reward[:3]), [1.0, -0.5, 1.5])  # L_t − L_(t+1) for the action at t
    assert_close(np.asarray(buf.data.state[0]), [9.0, 5.0, 0.0])  # oldest first, zero right-padding
    assert_close(np.asarray(buf.data.next_state[2]), [4.0, 4.5, 3.0])  # the window slides once full
    assert_close(np.asarray(state.history), [4.0, 4.5, 3.0])
    # a non-finite loss is refused without touching the state: the networks never see it
    rate, after, metrics = observe(state, float("nan"), jax.random.key(20))
    self.assertFalse(bool(metrics["finite"]))
    self.assertEqual(float(rate), np.float32(config.lr_min))
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state)):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  @pytest.mark.heavy
  def test_jit_matches_eager(self):
    config = AgentConfig(window=4, warmup=1, batch_size=2, buffer_size=8)
    agent = learning_rate_agent(config)
    runs = []
    for observe in (agent.observe, jax.jit(agent.observe)):
      state, rates = agent.init(jax.random.key(3), 2.0), []
      for i, loss in enumerate([1.5, 1.2, 1.3]):  # the third observation runs the first DDPG update
        rate, state, metrics = observe(state, loss, jax.random.key(i))
        rates.append(float(rate))
      self.assertTrue(bool(metrics["learned"]))
      runs.append((rates, jax.tree.leaves(state.ddpg.critic)))
    assert_close(runs[1][0], runs[0][0], "network")
    for a, b in zip(runs[1][1], runs[0][1]):
      assert_close(np.asarray(a), np.asarray(b), "network")

  @pytest.mark.heavy
  def test_critic_update_is_one_adam_step_down_the_float64_mse_gradient(self):
    """Terminal transitions (y = r, no target network involved) filling the buffer exactly, so the replay batch is
    the whole buffer: Adam's first step moves each critic weight by lr against the sign of the float64
    finite-difference gradient of the MSE; and the targets move by τ towards the updated networks."""
    config = AgentConfig(window=4, warmup=0, batch_size=6, buffer_size=6, critic_learning_rate=1e-3, tau=0.25)
    agent = ddpg(config)
    rng = np.random.default_rng(4)
    state = agent.init(jax.random.key(5))
    for _ in range(6):
      state = agent.remember(
        state, Transitions(rng.normal(size=4), rng.uniform(), rng.normal(), rng.normal(size=4), 1.0)
      )
    state = state._replace(steps=jnp.ones((), jnp.int32))
    batch = Transitions(*(np.asarray(c, np.float64) for c in state.buffer.data))
    before = as_float64(state.critic)
    new, metrics = jax.jit(agent.learn)(state, jax.random.key(6))
    self.assertTrue(bool(metrics["learned"]))
    assert_close(float(metrics["critic_loss"]), critic_mse_float64(before, batch), "network")
    after = as_float64(new.critic)
    checked = 0
    for layer, params in before.items():
      for name, w in params.items():
        for i in np.ndindex(w.shape):
          grad = 0.0
          for sign in (1.0, -1.0):
            leaf = w.copy()
            leaf[i] += sign * 1e-6
            grad += sign * critic_mse_float64({**before, layer: {**params, name: leaf}}, batch) / 2e-6
          if abs(grad) > 1e-4:  # where the difference quotient's error is negligible against the gradient
            step = -config.critic_learning_rate * grad / (abs(grad) + 1e-8)  # Adam's first step, ε = 1e-8
            assert_close(
              np.float32(after[layer][name][i] - w[i]), np.float32(step), "elementwise", scale=abs(w[i]) + abs(step)
            )
            checked += 1
    self.assertGreater(checked, 100)
    for online, target, old in (
      (new.critic, new.critic_target, state.critic_target),
      (new.actor, new.actor_target, state.actor_target),
    ):
      for o, t, b in zip(*(jax.tree.leaves(as_float64(x)) for x in (online, target, old))):
        assert_close(
          np.float32(t),
          np.float32(config.tau * o + (1 - config.tau) * b),
          "elementwise",
          scale=np.max(np.abs(b)) + np.max(np.abs(o)),
        )

  @pytest.mark.heavy
  def test_replay_buffer_wraps_and_samples_uniformly_without_replacement(self):
    buf = replay_buffer(3, 2)
    for i in range(5):
      buf = replay_add(buf, Transitions(np.full(2, i), i / 10, float(i), np.full(2, i + 1), 0.0))
    self.assertEqual((int(buf.size), int(buf.at)), (3, 2))
    self.assertEqual(sorted(np.asarray(buf.data.reward).tolist()), [2.0, 3.0, 4.0])
    # 10 of 16 rows held, 4 drawn: distinct held rows, each included with probability 4/10 (Monte Carlo, 4000 draws)
    big = replay_buffer(16, 1)
    for i in range(10):
      big = replay_add(big, Transitions(np.zeros(1), 0.0, float(i), np.zeros(1), 0.0))
    draws = np.asarray(
      jax.jit(jax.vmap(lambda k: replay_sample(big, k, 4).reward))(jax.random.split(jax.random.key(7), 4000))
    )
    self.assertTrue(all(len(set(row)) == 4 for row in draws.tolist()))
    self.assertTrue(np.all((draws >= 0) & (draws < 10)))
    freq = np.bincount(draws.astype(int).ravel(), minlength=10) / 4000
    assert_close(freq, np.full(10, 0.4), "statistical", rtol=0.0, atol=5 * np.sqrt(0.4 * 0.6 / 4000))
    # fewer rows held than the batch: with replacement, from the held rows only
    few = np.asarray(
      replay_sample(
        replay_add(replay_buffer(16, 1), Transitions(np.zeros(1), 0.0, 7.0, np.zeros(1), 0.0)), jax.random.key(8), 4
      ).reward
    )
    np.testing.assert_array_equal(few, [7.0] * 4)

  def test_bad_config(self):
    with self.assertRaisesRegex(ValueError, "lr_min"):
      ddpg(AgentConfig(lr_min=0.2, lr_max=0.1))
    with self.assertRaisesRegex(ValueError, "batch_size.*buffer_size"):
      learning_rate_agent(AgentConfig(batch_size=64, buffer_size=32))
    with self.assertRaisesRegex(ValueError, "window"):
      ddpg(AgentConfig(window=0))


if __name__ == "__main__":
  absltest.main()
