"""ICL's optimisation: the inner-step rules (paper vs the reference's batch ratio), the first-order meta step against
a hand-unrolled float64 two-step reference, and the DDPG learning-rate agent (a 1-D bandit whose reward peaks at a
chosen learning rate, the replay buffer, and the reward timing of the loss-driven agent)."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest, parameterized

from bcjax.contrastive import (DDPG, AgentConfig, LearningRateAgent, ReplayBuffer, first_order_meta_gradient,
                               inner_step_count, sgd_step)
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

  def test_equals_a_hand_unrolled_two_step_reference(self):
    rng = np.random.default_rng(0)
    a_s, b_s = rng.normal(size=(4, 3)), rng.normal(size=4)
    a_q, b_q = rng.normal(size=(5, 3)), rng.normal(size=5)
    theta = rng.normal(size=3)
    lr_s = (0.05, 0.02)
    out = first_order_meta_gradient(quadratic(jnp.asarray(a_s), jnp.asarray(b_s)),
                                    quadratic(jnp.asarray(a_q), jnp.asarray(b_q)), {"w": jnp.asarray(theta)}, 0,
                                    (1.0, 2.0), 1.0, lr_s)
    # by hand: θ1 = θ − lr1 Aᵀ(Aθ − b), θ2 = θ1 − lr2 Aᵀ(Aθ1 − 2b); gradient of the query loss at θ2
    t1 = theta - lr_s[0] * a_s.T @ (a_s @ theta - b_s)
    t2 = t1 - lr_s[1] * a_s.T @ (a_s @ t1 - 2 * b_s)
    assert_close(np.asarray(out.fast_params["w"]), t2)
    assert_close(np.asarray(out.grads["w"]), a_q.T @ (a_q @ t2 - b_q))
    assert_close(float(out.query_loss), 0.5 * np.sum((a_q @ t2 - b_q) ** 2))
    assert_close([float(v) for v in out.support_losses], [0.5 * np.sum((a_s @ theta - b_s) ** 2), 0.5 * np.sum((a_s @ t1 - 2 * b_s) ** 2)])
    self.assertEqual(int(out.aux), 3)  # two support calls and one query call threaded the state

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
    out = first_order_meta_gradient(support, query, {"w": jnp.asarray(theta)}, 0, (1.0, 2.0), 1.0, rate,
                                    value_and_grad=value_and_grad, update=jax.jit(sgd_step))
    l1 = 0.5 * np.sum((a_s @ theta - b_s) ** 2)
    t1 = theta - 0.1 / (1 + l1) * a_s.T @ (a_s @ theta - b_s)
    l2 = 0.5 * np.sum((a_s @ t1 - 2 * b_s) ** 2)
    t2 = t1 - 0.1 / (1 + l2) * a_s.T @ (a_s @ t1 - 2 * b_s)
    self.assertEqual([s for s, _ in seen], [0, 1])
    assert_close([v for _, v in seen], [l1, l2])
    assert_close(np.asarray(out.fast_params["w"]), t2)
    assert_close(np.asarray(out.grads["w"]), a_q.T @ (a_q @ t2 - b_q))
    self.assertEqual(calls, [support, support, query])

  def test_sgd_step(self):
    assert_close(np.asarray(sgd_step({"w": jnp.arange(3.0)}, {"w": jnp.ones(3)}, 0.5)["w"]), [-0.5, 0.5, 1.5])


class AgentTest(absltest.TestCase):

  def test_learns_a_bandit_whose_reward_peaks_at_a_chosen_rate(self):
    config = AgentConfig(window=4, actor_learning_rate=1e-4, critic_learning_rate=1e-3, warmup=50)
    agent = DDPG(config, jax.random.key(0))
    state = np.array([0.5, 0.4, 0.3, 0.2], np.float32)
    best = 0.03  # the learning rate with the highest reward
    start = abs(agent.learning_rate(agent.policy(state)) - best)
    for _ in range(1500):
      action = agent.act(state)
      reward = -10.0 * ((agent.learning_rate(action) - best) / config.lr_max) ** 2
      agent.remember(state, action, reward, state, done=True)
      agent.learn()
    learnt = agent.learning_rate(agent.policy(state))
    self.assertLess(abs(learnt - best), 0.01, f"policy rate {learnt}, initially {start} from the optimum")

  def test_reference_layer_norm_makes_the_actor_ignore_its_input(self):
    agent = DDPG(AgentConfig(window=4, actor_layer_norm=True), jax.random.key(1))
    outputs = {round(agent.policy(np.full(4, v, np.float32)), 6) for v in (0.0, 1.0, 5.0)}
    self.assertEqual(outputs, {0.5})  # sigmoid(β = 0), whatever the state
    varied = DDPG(AgentConfig(window=4), jax.random.key(1))
    self.assertGreater(len({round(varied.policy(np.full(4, v, np.float32)), 6) for v in (0.0, 1.0, 5.0)}), 1)

  def test_loss_agent_pairs_each_rate_with_the_next_decrement(self):
    config = AgentConfig(window=3, warmup=2, batch_size=2)
    agent = LearningRateAgent(config, jax.random.key(2), initial_loss=9.0)
    losses = [5.0, 4.0, 4.5, 3.0]
    rates = [agent(loss) for loss in losses]
    self.assertTrue(all(config.lr_min <= r <= config.lr_max for r in rates))
    buf = agent.ddpg.buffer
    self.assertEqual(buf.size, 3)
    assert_close(buf.data.reward[:3], [1.0, -0.5, 1.5])  # L_t − L_(t+1) for the action at t
    assert_close(buf.data.state[0], [9.0, 5.0, 0.0])  # oldest first, zero right-padding
    assert_close(buf.data.next_state[2], [4.0, 4.5, 3.0])
    with self.assertRaisesRegex(ValueError, "finite"):
      agent(float("nan"))

  def test_replay_buffer_wraps(self):
    buf = ReplayBuffer(3, 2)
    for i in range(5):
      buf.add(np.full(2, i), i / 10, float(i), np.full(2, i + 1))
    self.assertEqual(buf.size, 3)
    self.assertEqual(sorted(buf.data.reward.tolist()), [2.0, 3.0, 4.0])
    batch = buf.sample(np.random.default_rng(0), 2)
    self.assertEqual(batch.state.shape, (2, 2))

  def test_bad_config(self):
    with self.assertRaisesRegex(ValueError, "lr_min"):
      DDPG(AgentConfig(lr_min=0.2, lr_max=0.1), jax.random.key(0))


if __name__ == "__main__":
  absltest.main()
